"""Raw profile (.profraw) reader: versions 5-11, 32/64-bit, both byte orders (spec §4).

A raw file is one or more complete profiles back to back (an executable and its
instrumented shared libraries append to one file); all are merged into one
:class:`Profile` with records in file order. Sections have no stored offsets, so each
profile is walked section by section (:mod:`.raw_sections`, shared with the merge fast
path) with a bounds-checked :class:`Cursor`; every size taken from the file is checked
against the bytes that remain before it is used.
"""

from __future__ import annotations

import sys
from array import array
from bisect import bisect_right
from collections.abc import Sequence

from profkit.errors import ProfileFormatError
from profkit.formats._binary import Cursor
from profkit.formats.instrprof.layouts import (
    RELATIVE_POINTERS_FROM,
    VTABLE_RECORD,
    Layout,
    compile_layout,
)
from profkit.formats.instrprof.magics import RAW_MAGICS as RAW_MAGICS
from profkit.formats.instrprof.model import (
    FunctionRecord,
    Profile,
    ProfileKind,
    TemporalTrace,
    ValueKind,
    ValueSite,
)
from profkit.formats.instrprof.names import add_names, decode_names
from profkit.formats.instrprof.raw_sections import RawSections, locate, next_profile
from profkit.formats.instrprof.values import read_value_block

_NATIVE = "<" if sys.byteorder == "little" else ">"
_M64 = (1 << 64) - 1
#: byte coverage: the runtime stores 0 for "covered" (spec §4.5).
_COVERAGE_TABLE = bytes([1] + [0] * 255)


def parse_raw(data: bytes, path: str | None = None) -> Profile:
    """Parse a whole raw profile file (possibly several concatenated profiles)."""
    if not data:
        raise ProfileFormatError("malformed", "empty raw profile", path=path, offset=0)
    cur = Cursor(data, path=path, error=ProfileFormatError)
    magic = bytes(data[:8])
    if magic not in RAW_MAGICS:
        raise cur.fail("bad_magic", f"not a raw profile (magic {magic.hex()})", 0)
    profile = Profile(kind=ProfileKind.NONE, format="raw")
    timestamps: list[tuple[int, int]] = []
    first = True
    while first or next_profile(cur, magic):
        _read_one(cur, magic, profile, timestamps, first)
        first = False
    if timestamps:
        timestamps.sort()
        profile.temporal_traces.append(TemporalTrace(1, tuple(ref for _, ref in timestamps)))
        profile.temporal_trace_stream_size = 1
    return profile


def _read_one(
    cur: Cursor,
    magic: bytes,
    profile: Profile,
    timestamps: list[tuple[int, int]],
    first: bool,
) -> None:
    order, psize = RAW_MAGICS[magic]
    where = locate(cur, order, psize)
    start, version, word, kind, h = where.start, where.version, where.word, where.kind, where.header
    values_pos = cur.pos
    if first:
        profile.kind = kind
        profile.version = version
        profile.version_word = word
    else:
        # An executable and a shared library built by different clangs can append
        # profiles of different raw versions to one file; llvm-profdata can read none
        # of them, we read each with its own layout.
        if version != profile.version:
            profile.notes.append(
                f"profile at offset 0x{start:x} is raw v{version}, the first one v{profile.version}"
            )
        profile.kind |= kind

    if h["num_data"] == 0 and h["num_counters"]:
        # Debug-info / binary correlation: records and names stay in the binary (§4.2).
        profile.notes.append(
            f"raw profile at offset 0x{start:x} has {h['num_counters']} counters but no "
            "function records: it was written for correlation "
            "(-profile-correlate=debug-info|binary) and needs the binary to be read"
        )
    ids = Cursor(cur.data, *where.binary_ids, path=cur.path, error=ProfileFormatError)
    while ids.remaining:
        n = ids.u64("binary ID length", order)
        if n == 0:
            raise ids.fail("malformed", "binary ID of length 0", ids.pos - 8)
        profile.binary_ids.append(bytes(ids.take(n, "binary ID")))
        ids.align(8, "binary ID padding")

    rec_layout = where.record
    num_data = h["num_data"]
    data_pos = where.data[0]
    counters = memoryview(cur.data)[where.counters[0] : where.counters[1]]
    bitmap = memoryview(cur.data)[where.bitmap[0] : where.bitmap[1]]
    cur.pos = where.names[0]
    names = decode_names(cur, h["names_size"], "names section")
    vt_layout = compile_layout(VTABLE_RECORD, order, psize)
    vtables = list(vt_layout.struct.iter_unpack(cur.data[where.vtables[0] : where.vtables[1]]))
    cur.pos = where.vnames[0]
    vnames = decode_names(cur, h.get("vnames_size", 0), "vtable-names section")
    cur.pos = values_pos

    symtab: dict[int, str] = {}
    add_names(symtab, names)
    profile.symtab.update(symtab)
    if vnames:
        vsym: dict[int, str] = {}
        add_names(vsym, vnames)
        profile.vtable_names.update(vsym)
        profile.symtab.update({k: v for k, v in vsym.items() if k not in profile.symtab})

    records = list(
        rec_layout.struct.iter_unpack(cur.data[data_pos : data_pos + num_data * rec_layout.size])
    )
    _build_records(
        cur, where, order, psize, records, counters, bitmap, vtables, symtab, profile, timestamps
    )


def _build_records(
    cur: Cursor,
    where: RawSections,
    order: str,
    psize: int,
    records: list[tuple[int, ...]],
    counters: memoryview,
    bitmap: memoryview,
    vtables: list[tuple[int, ...]],
    symtab: dict[int, str],
    profile: Profile,
    timestamps: list[tuple[int, int]],
) -> None:
    """Turn data records into :class:`FunctionRecord` s, reading value blocks in step.

    The loop runs once per function of files with hundreds of thousands of them, so its
    common path is inline; the rare parts (timestamps, bitmaps, unaligned counters) and
    error messages are calls."""
    byte_cov = bool(where.kind & ProfileKind.SINGLE_BYTE_COVERAGE)
    temporal = bool(where.kind & ProfileKind.TEMPORAL)
    cell = 1 if byte_cov else 8
    pmask = (1 << (psize * 8)) - 1
    sign = 1 << (psize * 8 - 1)
    lay, data_pos = where.record, where.data[0]
    rec_size = lay.size
    cdelta = where.header["counters_delta"] & pmask
    bdelta = where.header.get("bitmap_delta", 0) & pmask
    i_name, i_hash, i_cptr, i_fptr, i_nc, i_vs, n_kinds, i_bptr, i_nb = _record_fields(lay)
    cells, flat = _counter_cells(counters, order, byte_cov)
    n_bytes = len(counters)
    append = profile.records.append
    # v8+: CounterPtr is relative to the record, which moves rec_size further from the
    # counters with every record (spec §4.5); v5/v7 pointers are absolute.
    step = rec_size if where.version >= RELATIVE_POINTERS_FROM else 0
    remap: _Remapper | None = None
    for idx, rec in enumerate(records):
        nref = rec[i_name]
        name = symtab.get(nref)
        if name is None:
            detail = f"record {idx}: name hash 0x{nref:016x} is not in the names section"
            raise cur.fail("malformed", detail, data_pos + idx * rec_size)
        n = rec[i_nc]
        off = (rec[i_cptr] - cdelta) & pmask
        cdelta -= step
        if n == 0 or off + n * cell > n_bytes:
            raise cur.fail(
                "malformed", _counter_problem(idx, name, n, off, cell, n_bytes, sign),
                data_pos + idx * rec_size,
            )  # fmt: skip
        if temporal:
            off, n = _timestamp(cur, counters, order, cell, off, n, nref, timestamps)
            if n <= 0:
                detail = f"record {idx} ({name}): no counters after timestamp"
                raise cur.fail("malformed", detail, data_pos + idx * rec_size)
        if cell != 8:
            counts = list(cells[off : off + n])
        elif off & 7 == 0:
            counts = flat[off >> 3 : (off >> 3) + n]
        else:
            counts = _unaligned_counts(counters, off, n, order)
        bm = b""
        if i_nb >= 0:
            nb = rec[i_nb]
            if nb:  # MC/DC only
                boff = (rec[i_bptr] - bdelta) & pmask
                if boff + nb > len(bitmap):
                    detail = f"record {idx} ({name}): bitmap bytes outside the bitmap section"
                    raise cur.fail("malformed", detail, data_pos + idx * rec_size)
                bm = bytes(bitmap[boff : boff + nb])
            bdelta -= step
        frec = FunctionRecord(name, rec[i_hash], counts, bm)
        if rec[i_vs] or rec[i_vs + 1] or (n_kinds > 2 and rec[i_vs + 2]):
            sites = read_value_block(cur, order, f"value data of {name}")
            if sites:
                if remap is None:
                    remap = _Remapper(records, i_fptr, i_name, vtables)
                frec.value_sites = remap(sites)
        append(frec)


def _record_fields(lay: Layout) -> tuple[int, int, int, int, int, int, int, int, int]:
    """Tuple positions of the record fields :func:`_build_records` reads (-1: absent):
    name, hash, counter pointer, function pointer, number of counters, first value-site
    count and number of value kinds, bitmap pointer, number of bitmap bytes."""
    i_vs, n_kinds = lay.index["num_value_sites"]
    return (
        lay.pos("name_ref"),
        lay.pos("func_hash"),
        lay.pos("counter_ptr"),
        lay.pos("function_ptr"),
        lay.pos("num_counters"),
        i_vs,
        n_kinds,
        lay.pos("bitmap_ptr") if lay.has("bitmap_ptr") else -1,
        lay.pos("num_bitmap_bytes") if lay.has("num_bitmap_bytes") else -1,
    )


def _counter_cells(
    counters: memoryview, order: str, byte_cov: bool
) -> tuple[Sequence[int], list[int]]:
    """(each counter cell, the same as a list for 8-byte counters): one C-level
    conversion of the whole section, so records then take list slices."""
    if byte_cov:
        return bytes(counters).translate(_COVERAGE_TABLE), []
    arr = array("Q")
    arr.frombytes(counters)
    if order != _NATIVE:
        arr.byteswap()
    return arr, arr.tolist()


def _timestamp(
    cur: Cursor,
    counters: memoryview,
    order: str,
    cell: int,
    off: int,
    n: int,
    nref: int,
    timestamps: list[tuple[int, int]],
) -> tuple[int, int]:
    """Temporal profiles: the record's first 8 bytes are its first-call timestamp.
    Records it (0 and all-ones mean "never called") and returns the counters' (off, n)."""
    raw = bytes(counters[off : off + 8])
    ts = int.from_bytes(raw, "little" if order == "<" else "big")
    if ts not in (0, _M64):
        timestamps.append((ts, nref))
    return off + 8, n - 8 // cell


def _unaligned_counts(counters: memoryview, off: int, n: int, order: str) -> list[int]:
    """8-byte counters at an offset that is not a multiple of 8 (not from clang's runtime)."""
    counts = list(array("Q", bytes(counters[off : off + 8 * n])))
    return _swapped(counts) if order != _NATIVE else counts


def _counter_problem(
    idx: int, name: str, n: int, off: int, cell: int, n_bytes: int, sign: int
) -> str:
    """The message for a record whose counters cannot be located."""
    if n == 0:
        return f"record {idx} ({name}): no counters"
    if off & sign:
        return f"record {idx} ({name}): counter offset is negative"
    return (
        f"record {idx} ({name}): counters at offset {off} + {n} × {cell} "
        f"overrun the {n_bytes}-byte counter section"
    )


class _Remapper:
    """Turns run-time addresses into NameRefs (0 = unknown), as LLVM's raw reader does.

    Built only for profiles that have value data. Indirect-call targets map through each
    record's FunctionPointer (on duplicates the smallest hash wins, as in LLVM's sorted,
    de-duplicated map); vtable targets through the vtable records' address ranges.
    """

    def __init__(
        self,
        records: list[tuple[int, ...]],
        i_fptr: int,
        i_name: int,
        vtables: list[tuple[int, ...]],
    ) -> None:
        addr_map: dict[int, int] = {}
        for rec in records:
            fptr = rec[i_fptr]
            if fptr:
                ref = rec[i_name]
                old = addr_map.get(fptr)
                if old is None or ref < old:
                    addr_map[fptr] = ref
        self.addr_map = addr_map
        self.vt_sorted = sorted((v[1], v[1] + v[2], v[0]) for v in vtables)
        self.vt_starts = [v[0] for v in self.vt_sorted]

    def __call__(self, sites: dict[ValueKind, list[ValueSite]]) -> dict[ValueKind, list[ValueSite]]:
        return _remap(sites, self.addr_map, self.vt_starts, self.vt_sorted)


def _remap(
    sites: dict[ValueKind, list[ValueSite]],
    addr_map: dict[int, int],
    vt_starts: list[int],
    vt_sorted: list[tuple[int, int, int]],
) -> dict[ValueKind, list[ValueSite]]:
    """Turn run-time addresses into NameRefs (0 = unknown), as LLVM's raw reader does."""
    out: dict[ValueKind, list[ValueSite]] = {}
    for kind, site_list in sites.items():
        if kind == ValueKind.INDIRECT_CALL_TARGET:
            out[kind] = [[(addr_map.get(v, 0), c) for v, c in s] for s in site_list]
        elif kind == ValueKind.VTABLE_TARGET:
            new: list[ValueSite] = []
            for s in site_list:
                row = []
                for v, c in s:
                    j = bisect_right(vt_starts, v) - 1
                    ref = vt_sorted[j][2] if j >= 0 and v < vt_sorted[j][1] else 0
                    row.append((ref, c))
                new.append(row)
            out[kind] = new
        else:
            out[kind] = site_list
    return out


def _swapped(values: list[int]) -> list[int]:
    a = array("Q", values)
    a.byteswap()
    return a.tolist()
