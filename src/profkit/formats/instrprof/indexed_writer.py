"""The indexed profile writer (.profdata), byte-identical to ``llvm-profdata merge`` (spec §5).

One writer serves every target version we know a shipped ``llvm-profdata`` writes:
7 (LLVM 13/14), 8 (15), 9 (16), 10 (17), 11 (18), 12 (19–21) and 13 (22). Versions
differ in the header length, the bitmap field of each record and which trailing
sections exist (:data:`LAYOUTS`, read off the one version table in :mod:`.versions`); the hash-table layout and summaries are the same for
all. Data a version cannot hold (MC/DC bitmaps before 11, temporal traces before 10,
vtable values before 12, binary IDs before 9) is refused with a :class:`UsageError`
rather than silently dropped — except binary IDs, which LLVM itself drops before v9.
"""

from __future__ import annotations

import os
import struct
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from profkit._atomic import write_atomic
from profkit.errors import UsageError
from profkit.formats.instrprof import magics
from profkit.formats.instrprof.hashing import name_md5
from profkit.formats.instrprof.hashtable import dense_map_order, string_map_order, table_layout
from profkit.formats.instrprof.model import FunctionRecord, Profile, ProfileKind, Summary, ValueKind
from profkit.formats.instrprof.summary import DEFAULT_CUTOFFS, SummaryBuilder, detailed_entries
from profkit.formats.instrprof.versions import (
    BINARY_IDS_FROM,
    BITMAP_FROM,
    LLVM19_ORDER_FROM,
    LOOP_ENTRIES_FROM,
    MEMPROF_FROM,
    NEWEST_WRITTEN,
    OLDEST_WRITTEN,
    TEMPORAL_FROM,
    VTABLE_FROM,
    header_fields,
    header_size,
)

INDEXED_MAGIC = int.from_bytes(magics.INDEXED_MAGIC, "little")  # 0x8169666F72706CFF
NEWEST_VERSION = NEWEST_WRITTEN
MAX_VALUES_PER_SITE = 255


@dataclass(frozen=True)
class IndexedLayout:
    """What the writer puts in one indexed version, read off :mod:`.versions` (spec §5.1,
    §5.4, §5.5): the header's fields and which optional parts exist."""

    version: int

    @property
    def header(self) -> tuple[str, ...]:
        return header_fields(self.version)

    @property
    def bitmap_in_record(self) -> bool:
        return self.version >= BITMAP_FROM

    @property
    def binary_ids(self) -> bool:
        return self.version >= BINARY_IDS_FROM

    @property
    def temporal(self) -> bool:
        return self.version >= TEMPORAL_FROM

    @property
    def vtable_names(self) -> bool:
        return self.version >= VTABLE_FROM

    @property
    def vtable_values(self) -> bool:
        return self.version >= VTABLE_FROM

    @property
    def loop_entries(self) -> bool:
        return self.version >= LOOP_ENTRIES_FROM

    @property
    def llvm19_order(self) -> bool:
        """LLVM 19+ orders: names sorted, SmallDenseMap's mixing hash under one name
        (LLVM 14/16 iterate a StringMap and hash integers as ``key * 37``)."""
        return self.version >= LLVM19_ORDER_FROM

    @property
    def skips_pseudo_counts(self) -> bool:
        # LLVM 14 (v7) counts PseudoHot/PseudoWarm records into the summary; 15+ skip them.
        return self.version >= MEMPROF_FROM


#: The versions the writer produces (``--indexed-version``), oldest first.
LAYOUTS: dict[int, IndexedLayout] = {
    v: IndexedLayout(v) for v in range(OLDEST_WRITTEN, NEWEST_WRITTEN + 1)
}

_KIND_BITS = (
    ProfileKind.IR
    | ProfileKind.CS_IR
    | ProfileKind.ENTRY_FIRST
    | ProfileKind.INSTR_LOOP_ENTRIES
    | ProfileKind.SINGLE_BYTE_COVERAGE
    | ProfileKind.FUNCTION_ENTRY_ONLY
    | ProfileKind.TEMPORAL
)
_U64 = struct.Struct("<Q")
_ITEM_HEAD = struct.Struct("<QQQ")
_EMPTY_VALUE_DATA = struct.pack("<II", 8, 0)


def layout_for(version: int | None) -> tuple[int, IndexedLayout]:
    """The target version (default newest) and its layout; UsageError for unknown ones."""
    chosen = NEWEST_VERSION if version is None else version
    if chosen not in LAYOUTS:
        known = ", ".join(map(str, LAYOUTS))
        raise UsageError(f"cannot write indexed version {chosen}; supported versions: {known}")
    return chosen, LAYOUTS[chosen]


def group_records(records: Iterable[FunctionRecord]) -> dict[str, list[FunctionRecord]]:
    """Records by name, first-seen order; a repeated (name, hash) must already be merged."""
    groups: dict[str, list[FunctionRecord]] = {}
    for record in records:
        group = groups.get(record.name)
        if group is None:
            groups[record.name] = [record]
        else:
            if any(r.hash == record.hash for r in group):
                raise UsageError(
                    f"function {record.name!r} hash 0x{record.hash:x} appears twice; merge the profile first"
                )
            group.append(record)
    return groups


def _check_expressible(profile: Profile, version: int, layout: IndexedLayout) -> None:
    if profile.kind & ProfileKind.MEMPROF:
        raise UsageError("writing a MemProf section is not supported")
    if profile.kind & ProfileKind.TEMPORAL and not layout.temporal:
        raise UsageError(
            f"indexed version {version} cannot hold temporal profiles "
            f"(needs {TEMPORAL_FROM} or newer)"
        )
    if profile.kind & ProfileKind.INSTR_LOOP_ENTRIES and not layout.loop_entries:
        raise UsageError(
            f"indexed version {version} cannot hold loop-entry profiles (needs {LOOP_ENTRIES_FROM})"
        )
    for record in profile.records:
        if record.bitmap and not layout.bitmap_in_record:
            raise UsageError(
                f"indexed version {version} cannot hold MC/DC bitmaps ({record.name}; "
                f"needs {BITMAP_FROM} or newer)"
            )
        if record.value_sites.get(ValueKind.VTABLE_TARGET) and not layout.vtable_values:
            raise UsageError(
                f"indexed version {version} cannot hold vtable value profiles ({record.name}; "
                f"needs {VTABLE_FROM} or newer)"
            )
        if not record.counts:
            raise UsageError(f"function {record.name!r} has no counters")


def value_data(record: FunctionRecord) -> bytes:
    """``ValueProfData::serializeFrom`` (little-endian): the value block of one record."""
    if not record.value_sites:
        return _EMPTY_VALUE_DATA
    sites_by_kind = [
        (int(k), record.value_sites[k]) for k in ValueKind if record.value_sites.get(k)
    ]
    if not sites_by_kind:
        return _EMPTY_VALUE_DATA
    parts: list[bytes] = []
    for kind, sites in sites_by_kind:
        header = struct.pack("<II", kind, len(sites)) + bytes(
            min(len(s), MAX_VALUES_PER_SITE) for s in sites
        )
        header += bytes(-len(header) % 8)
        flat: list[int] = []
        for site in sites:
            for value, count in site[:MAX_VALUES_PER_SITE]:
                flat.append(value)
                flat.append(count)
        parts.append(header + struct.pack(f"<{len(flat)}Q", *flat))
    body = b"".join(parts)
    return struct.pack("<II", len(body) + 8, len(sites_by_kind)) + body


def record_data(record: FunctionRecord, with_bitmap: bool) -> bytes:
    """One record of an item's data (spec §5.4)."""
    counts = record.counts
    n = len(counts)
    out = struct.pack(f"<QQ{n}Q", record.hash, n, *counts)
    if with_bitmap:
        bitmap = record.bitmap
        out += struct.pack(f"<Q{len(bitmap)}Q", len(bitmap), *bitmap)
    return out + value_data(record)


class _AllCountsSummaryBuilder:
    """LLVM 14's summary builder: no pseudo counts, but every ``2^64 − 1`` counter is skipped.

    (The record still counts as a function.) LLVM 15+ skip PseudoHot/PseudoWarm records
    instead, which is what :class:`SummaryBuilder` does.
    """

    __slots__ = ("_lists",)

    def __init__(self) -> None:
        self._lists: list[Sequence[int]] = []

    def add_counts(self, counts: Sequence[int]) -> None:
        if counts:
            self._lists.append(counts)

    def build(self) -> Summary:
        lists = self._lists
        flat = [c for counts in lists for c in counts if c != _M64]
        internal = [c for counts in lists for c in counts[1:] if c != _M64]
        total = sum(flat) & _M64
        return Summary(
            total_num_functions=len(lists),
            total_num_blocks=len(flat),
            max_function_count=max((c[0] for c in lists if c[0] != _M64), default=0),
            max_block_count=max(flat, default=0),
            max_internal_block_count=max(internal, default=0),
            total_block_count=total,
            entries=detailed_entries(Counter(flat), total, DEFAULT_CUTOFFS),
        )


_M64 = (1 << 64) - 1


def _summary_words(summary: Summary) -> list[int]:
    words = [
        6,
        len(summary.entries),
        summary.total_num_functions,
        summary.total_num_blocks,
        summary.max_function_count,
        summary.max_block_count,
        summary.max_internal_block_count,
        summary.total_block_count,
    ]
    for entry in summary.entries:
        words += [entry.cutoff, entry.min_count, entry.num_counts]
    return words


def _is_zero(group: Sequence[FunctionRecord]) -> bool:
    return not any(any(r.counts) or any(r.bitmap) for r in group)


def build_indexed(profile: Profile, version: int | None = None, *, sparse: bool = False) -> bytes:
    """The bytes ``llvm-profdata merge`` writes for ``profile`` in indexed ``version``.

    ``profile.records`` must hold each (name, hash) once (a :class:`ProfileMerger`
    result, or any reader's output); their order under one name is insertion order,
    which — as in LLVM — decides the order of several records under that name.
    ``sparse`` drops names whose records are all zero, like ``merge --sparse``.
    """
    chosen, layout = layout_for(version)
    _check_expressible(profile, chosen, layout)
    groups = group_records(profile.records)
    # Order every name first, then drop the all-zero ones: LLVM ≤ 16 iterate a StringMap
    # that holds them all, and its order depends on everything that was inserted.
    names = list(groups)
    keys = [n.encode("utf-8", "surrogateescape") for n in names]
    if layout.llvm19_order:
        order = sorted(range(len(keys)), key=keys.__getitem__)
    else:
        order = string_map_order(keys)
    order = [i for i in order if not (sparse and _is_zero(groups[names[i]]))]
    names = [names[i] for i in order]
    keys = [keys[i] for i in order]
    key_hashes = [name_md5(k) for k in keys]
    num_buckets, chains = table_layout(key_hashes)

    is_cs = bool(profile.kind & ProfileKind.CS_IR)
    summary_words = 2 + 6 + 3 * len(DEFAULT_CUTOFFS)
    payload_start = header_size(chosen) + 8 * summary_words * (2 if is_cs else 1)

    regular: SummaryBuilder | _AllCountsSummaryBuilder
    cs: SummaryBuilder | _AllCountsSummaryBuilder
    if layout.skips_pseudo_counts:
        regular, cs = SummaryBuilder(), SummaryBuilder()
    else:
        regular, cs = _AllCountsSummaryBuilder(), _AllCountsSummaryBuilder()
    out = bytearray(payload_start)
    bucket_offsets = [0] * num_buckets
    with_bitmap = layout.bitmap_in_record
    for bucket, chain in enumerate(chains):
        if not chain:
            continue
        bucket_offsets[bucket] = len(out)
        out += struct.pack("<H", len(chain))
        for index in chain:
            group = groups[names[index]]
            if len(group) > 1:
                order = dense_map_order([r.hash for r in group], layout.llvm19_order)
                group = [group[i] for i in order]
            data = b"".join(record_data(r, with_bitmap) for r in group)
            for r in group:
                (cs if r.is_cs else regular).add_counts(r.counts)
            key = keys[index]
            out += _ITEM_HEAD.pack(key_hashes[index], len(key), len(data))
            out += key
            out += data
    out += bytes(-len(out) % 8)
    hash_offset = len(out)
    out += struct.pack(f"<QQ{num_buckets}Q", num_buckets, len(names), *bucket_offsets)

    fields = {name: 0 for name in layout.header}  # unused, hash_type (MD5), memprof: 0
    fields.update(magic=INDEXED_MAGIC, hash_offset=hash_offset)
    fields["version"] = chosen | int(profile.kind & _KIND_BITS)
    if layout.binary_ids:
        fields["binary_id_offset"] = len(out)
        out += _binary_id_section(profile.binary_ids)
    if layout.vtable_names:
        fields["vtable_names_offset"] = len(out)
        out += _U64.pack(0)  # vtable names are kept only on request (§5.5); we never do
    if profile.kind & ProfileKind.TEMPORAL:
        fields["temporal_traces_offset"] = len(out)
        out += _temporal_section(profile)

    header = [fields[name] for name in layout.header]
    words = header + _summary_words(regular.build())
    if is_cs:
        words += _summary_words(cs.build())
    out[:payload_start] = struct.pack(f"<{len(words)}Q", *words)
    return bytes(out)


def _binary_id_section(binary_ids: Sequence[bytes]) -> bytes:
    unique = sorted(set(binary_ids))
    body = b"".join(_U64.pack(len(bid)) + bid + bytes(-len(bid) % 8) for bid in unique)
    return _U64.pack(len(body)) + body


def _temporal_section(profile: Profile) -> bytes:
    words = [len(profile.temporal_traces), profile.temporal_trace_stream_size]
    for trace in profile.temporal_traces:
        words += [trace.weight, len(trace.function_refs), *trace.function_refs]
    return struct.pack(f"<{len(words)}Q", *words)


def write_indexed(
    profile: Profile,
    path: str | os.PathLike[str],
    version: int | None = None,
    *,
    sparse: bool = False,
) -> None:
    """Write :func:`build_indexed` output to ``path`` atomically (temp file + rename)."""
    write_atomic(path, build_indexed(profile, version, sparse=sparse))
