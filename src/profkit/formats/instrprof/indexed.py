"""Indexed profile (.profdata) reader: versions 1-13, and 14 experimentally (spec §5).

Indexed files are little-endian. The header grows by one offset field at a time
(:mod:`.versions`, shared with the writer), then come the summaries, the on-disk chained hash table of
function names, and optional sections reached through the header's offsets. Records
keep the hash table's iteration order (bucket order), which is what ``show`` prints.
"""

from __future__ import annotations

import struct

from profkit.errors import ProfileFormatError
from profkit.formats._binary import Cursor
from profkit.formats.instrprof.magics import INDEXED_MAGIC as INDEXED_MAGIC
from profkit.formats.instrprof.model import (
    FunctionRecord,
    Profile,
    ProfileKind,
    Summary,
    SummaryEntry,
    TemporalTrace,
)
from profkit.formats.instrprof.names import add_names, decode_names
from profkit.formats.instrprof.values import read_value_block
from profkit.formats.instrprof.versions import (
    BINARY_IDS_FROM,
    BITMAP_FROM,
    EXPLICIT_COUNTS_FROM,
    NEWEST_READ,
    PACKED_BITMAP_FROM,
    SUMMARY_FROM,
    TEMPORAL_FROM,
    VALUE_DATA_FROM,
    VTABLE_FROM,
    header_fields,
)

#: Newest indexed version we read; 14 (LLVM 23) follows the spec's unverified notes.
MAX_INDEXED_VERSION = NEWEST_READ

_U16 = struct.Struct("<H")
_ITEM = struct.Struct("<QQQ")
_U64 = struct.Struct("<Q")
_U64X2 = struct.Struct("<QQ")
#: ``TotalSize = 8, NumValueKinds = 0``: the value block of a record without value sites.
_EMPTY_VALUE_BLOCK = bytes([8, 0, 0, 0, 0, 0, 0, 0])
_ZERO8 = bytes(8)
#: Summary field order (spec §5.2).
_SUMMARY_FIELDS = (
    "total_num_functions",
    "total_num_blocks",
    "max_function_count",
    "max_block_count",
    "max_internal_block_count",
    "total_block_count",
)


def parse_indexed(data: bytes, path: str | None = None) -> Profile:
    """Parse an indexed profile held in ``data``."""
    if not isinstance(data, bytes):
        data = bytes(data)
    cur = Cursor(data, path=path, error=ProfileFormatError)
    if data[:8] != INDEXED_MAGIC:
        raise cur.fail("bad_magic", "not an indexed profile", 0)
    cur.need(16, "indexed header")
    word = _U64.unpack_from(data, 8)[0]
    version = word & 0xFFFFFFFF
    if not 1 <= version <= MAX_INDEXED_VERSION:
        raise cur.fail(
            "unsupported_version",
            f"indexed profile version {version} (supported: 1-{MAX_INDEXED_VERSION})",
            8,
        )
    fields = header_fields(version)
    hdr = dict(
        zip(fields, cur.unpack("<" + "Q" * len(fields), f"indexed v{version} header"), strict=True)
    )
    if hdr["hash_type"] != 0:
        raise cur.fail("malformed", f"hash type {hdr['hash_type']} (only 0 = MD5 exists)", 24)
    kind = ProfileKind.from_version_word(word)
    profile = Profile(kind=kind, format="indexed", version=version, version_word=word)
    if version >= SUMMARY_FROM:
        profile.summary = _read_summary(cur, "summary")
        if kind & ProfileKind.CS_IR:
            profile.cs_summary = _read_summary(cur, "CS summary")
    payload = cur.pos
    _read_table(cur, data, hdr["hash_offset"], payload, version, profile)
    if hdr.get("memprof_offset") or kind & ProfileKind.MEMPROF:
        profile.notes.append("MemProf section skipped (heap profile data is not read)")
    if version >= BINARY_IDS_FROM and hdr["binary_id_offset"]:
        _read_binary_ids(_at(cur, hdr["binary_id_offset"], "binary IDs"), profile)
    if version >= TEMPORAL_FROM and kind & ProfileKind.TEMPORAL and hdr["temporal_traces_offset"]:
        _read_traces(_at(cur, hdr["temporal_traces_offset"], "temporal traces"), profile)
    if version >= VTABLE_FROM and hdr["vtable_names_offset"]:
        vc = _at(cur, hdr["vtable_names_offset"], "vtable names")
        size = vc.u64("vtable names length")
        names = decode_names(vc, size, "vtable names")
        if names:
            vsym: dict[int, str] = {}
            add_names(vsym, names)
            profile.vtable_names.update(vsym)
    return profile


def _at(cur: Cursor, offset: int, what: str) -> Cursor:
    """A cursor at absolute ``offset`` (checked against the file)."""
    if offset > cur.end:
        raise cur.fail(
            "malformed", f"{what} offset 0x{offset:x} is past the end (0x{cur.end:x})", 8
        )
    return Cursor(cur.data, offset, cur.end, path=cur.path, error=cur.error)


def _read_summary(cur: Cursor, what: str) -> Summary:
    nfields, nentries = cur.unpack("<QQ", what)
    cur.check_count(nfields, 8, f"{what} fields")
    vals = cur.unpack(f"<{nfields}Q", f"{what} fields")
    cur.check_count(nentries, 24, f"{what} entries")
    flat = cur.unpack(f"<{3 * nentries}Q", f"{what} entries")
    summary = Summary(entries=[SummaryEntry(*flat[i : i + 3]) for i in range(0, len(flat), 3)])
    for name, value in zip(_SUMMARY_FIELDS, vals, strict=False):
        setattr(summary, name, value)
    return summary


def _read_table(
    cur: Cursor, data: bytes, hash_offset: int, payload: int, version: int, profile: Profile
) -> None:
    """Iterate the on-disk chained hash table in bucket order (as LLVM's iterator does).

    This loop runs once per function of possibly huge files, so it works on plain
    offsets with local names; every length is still checked before it is used.
    """
    tc = _at(cur, hash_offset, "hash table")
    _nbuckets, nentries = tc.unpack("<QQ", "hash table header")
    end = cur.end
    pos = payload
    # Every item takes at least 24 bytes plus its bucket's count, so a larger entry
    # count cannot be genuine.
    if nentries * 24 > end - pos:
        raise cur.fail(
            "too_large",
            f"hash table claims {nentries} entries, the file has room for {max(end - pos, 0) // 24}",
            hash_offset + 8,
        )
    out = profile.records
    symtab = profile.symtab
    dotted: list[str] = []
    item_unpack = _ITEM.unpack_from
    u16_unpack = _U16.unpack_from
    head_unpack = _U64X2.unpack_from
    append = out.append
    remember = symtab.setdefault
    record = FunctionRecord
    structs = _COUNT_STRUCTS
    simple = VALUE_DATA_FROM <= version < PACKED_BITMAP_FROM
    # The common item holds one record without bitmap bytes or value data: it ends in
    # [bitmap byte count 0 (v11+)] + the empty value block, checked with one comparison.
    tail = (_ZERO8 if version >= BITMAP_FROM else b"") + _EMPTY_VALUE_BLOCK
    ntail = len(tail)
    # Bytes of such an item besides its counters: hash, counter count, tail.
    fixed = 16 + ntail
    seen = 0
    while seen < nentries:
        if pos + 2 > end:
            raise cur.fail(
                "truncated", f"hash table bucket: {seen} of {nentries} entries read", pos
            )
        nitems = u16_unpack(data, pos)[0]
        pos += 2
        for _ in range(nitems):
            if pos + 24 > end:
                raise cur.fail("truncated", "hash table item header needs 24 bytes", pos)
            khash, klen, dlen = item_unpack(data, pos)
            pos += 24
            if klen + dlen > end - pos:
                raise cur.fail(
                    "truncated",
                    f"hash table item: key {klen} + data {dlen} bytes, {end - pos} remain",
                    pos - 24,
                )
            name = data[pos : pos + klen].decode("utf-8", "surrogateescape")
            pos += klen
            item_end = pos + dlen
            if simple and dlen >= fixed and data[item_end - ntail : item_end] == tail:
                func_hash, n = head_unpack(data, pos)
                if n == (dlen - fixed) >> 3:  # one record: counters fill the rest
                    st = structs.get(n) or _counts_struct(n)
                    append(record(name, func_hash, list(st.unpack_from(data, pos + 16))))
                else:
                    _read_item(data, pos, item_end, name, version, out, cur)
            else:
                _read_item(data, pos, item_end, name, version, out, cur)
            pos = item_end
            # The stored key hash is the name's MD5 NameRef: no need to hash 20k names.
            remember(khash, name)
            if "." in name:
                dotted.append(name)
            seen += 1
            if seen >= nentries:
                break
    if dotted:
        add_names(symtab, dotted)


_COUNT_STRUCTS: dict[int, struct.Struct] = {}


def _counts_struct(n: int) -> struct.Struct:
    st = _COUNT_STRUCTS.get(n)
    if st is None:
        st = struct.Struct(f"<{n}Q")
        if len(_COUNT_STRUCTS) < 4096:
            _COUNT_STRUCTS[n] = st
    return st


def _read_item(
    data: bytes,
    pos: int,
    end: int,
    name: str,
    version: int,
    out: list[FunctionRecord],
    cur: Cursor,
) -> None:
    """Decode the records stored under one name (spec §5.4), ``data[pos:end]``."""

    def fail(kind: str, detail: str, at: int) -> ProfileFormatError:
        return ProfileFormatError(kind, f"{name}: {detail}", path=cur.path, offset=at)  # type: ignore[arg-type]

    while pos < end:
        rec_at = pos
        if version < EXPLICIT_COUNTS_FROM:
            if end - pos < 8:
                raise fail("truncated", f"record header needs 8 bytes, {end - pos} remain", pos)
            func_hash = _U64.unpack_from(data, pos)[0]
            pos += 8
            n = (end - pos) // 8
        else:
            if end - pos < 16:
                raise fail("truncated", f"record header needs 16 bytes, {end - pos} remain", pos)
            func_hash, n = _U64X2.unpack_from(data, pos)
            pos += 16
        if n * 8 > end - pos:
            raise fail("truncated", f"{n} counters need {8 * n} bytes, {end - pos} remain", rec_at)
        counts = list(_counts_struct(n).unpack_from(data, pos))
        pos += 8 * n
        bitmap = b""
        if version >= BITMAP_FROM:
            if end - pos < 8:
                raise fail("truncated", "bitmap byte count needs 8 bytes", pos)
            nb = _U64.unpack_from(data, pos)[0]
            pos += 8
            if version >= PACKED_BITMAP_FROM:
                size = nb + (-nb) % 8
                if size > end - pos:
                    raise fail("truncated", f"{nb} bitmap bytes, {end - pos} remain", pos)
                bitmap = data[pos : pos + nb]
                pos += size
                if end - pos < 8:
                    raise fail("truncated", "uniformity bit count needs 8 bytes", pos)
                nbits = _U64.unpack_from(data, pos)[0]
                pos += 8
                nbytes = (nbits + 7) // 8
                size = nbytes + (-nbytes) % 8
                if size > end - pos:
                    raise fail(
                        "truncated", f"{nbits} uniformity bits, {end - pos} bytes remain", pos
                    )
                pos += size
            elif nb:
                if nb * 8 > end - pos:
                    raise fail(
                        "truncated", f"{nb} bitmap bytes need {8 * nb}, {end - pos} remain", pos
                    )
                bitmap = bytes(v & 0xFF for v in _counts_struct(nb).unpack_from(data, pos))
                pos += 8 * nb
        rec = FunctionRecord(name, func_hash, counts, bitmap)
        if version >= VALUE_DATA_FROM:
            if end - pos >= 8 and data[pos : pos + 8] == _EMPTY_VALUE_BLOCK:
                pos += 8
            else:
                c = Cursor(data, pos, end, path=cur.path, error=ProfileFormatError)
                sites = read_value_block(c, "<", f"{name}: value data")
                pos = c.pos
                if sites:
                    rec.value_sites = sites
        out.append(rec)


def _read_binary_ids(c: Cursor, profile: Profile) -> None:
    size = c.u64("binary ID section size")
    ids = c.sub(size, "binary IDs")
    while ids.remaining:
        n = ids.u64("binary ID length")
        if n == 0:
            raise ids.fail("malformed", "binary ID of length 0", ids.pos - 8)
        profile.binary_ids.append(bytes(ids.take(n, "binary ID")))
        ids.align(8, "binary ID padding")


def _read_traces(c: Cursor, profile: Profile) -> None:
    ntraces, stream = c.unpack("<QQ", "temporal trace header")
    c.check_count(ntraces, 16, "temporal traces")
    profile.temporal_trace_stream_size = stream
    for _ in range(ntraces):
        weight, nfuncs = c.unpack("<QQ", "temporal trace")
        c.check_count(nfuncs, 8, "temporal trace functions")
        refs = c.unpack(f"<{nfuncs}Q", "temporal trace functions")
        profile.temporal_traces.append(TemporalTrace(weight, tuple(refs)))
