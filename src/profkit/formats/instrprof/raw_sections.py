"""Where the sections of one profile inside a raw file lie: the one raw-file walker.

A raw profile stores no section offsets: they follow from the header's sizes (spec
§4.2). Both the reader (:mod:`.raw`) and the merge fast path
(:mod:`.merge.raw_shape`) need them, so both walk the file here, with the same bounds
checks and the same padding rules.

Padding follows LLVM's reader (``RawInstrProfReader::readHeader``): the padding after
the names, vtable and vtable-names sections is ``getNumPaddingBytes(size)``, computed
from the section's *size*, not from where it lands in the file. The two agree for files
whose earlier sections are 8-byte multiples, but clang 16 with 1-byte counters
(``-pgo-function-entry-coverage``) writes ``padding_after_counters = 0`` after, say, 3
counter bytes; its names section then ends unaligned, often at the end of the file, and
``llvm-profdata-16`` reads it. So do we.
"""

from __future__ import annotations

from dataclasses import dataclass

from profkit.formats._binary import Cursor
from profkit.formats.instrprof.layouts import (
    RAW_HEADER,
    RAW_RECORD,
    RAW_VERSIONS,
    VTABLE_RECORD,
    Layout,
    compile_layout,
)
from profkit.formats.instrprof.model import ProfileKind

Span = tuple[int, int]  # [start, end) byte offsets in the file


def padding(size: int) -> int:
    """``getNumPaddingBytes``: what follows a section of ``size`` bytes."""
    return -size % 8


@dataclass(slots=True)
class RawSections:
    """One profile's header fields and the absolute byte range of each of its sections."""

    start: int
    version: int
    word: int  # the whole version word (version | variant flags)
    kind: ProfileKind
    header: dict[str, int]
    header_size: int
    record: Layout  # the data-record layout of this version and pointer size
    binary_ids: Span
    data: Span
    counters: Span
    bitmap: Span
    names: Span
    vtables: Span
    vnames: Span
    values: int  # where value-profile data begins

    @property
    def num_data(self) -> int:
        return self.header["num_data"]


def locate(cur: Cursor, order: str, psize: int) -> RawSections:
    """Walk the profile starting at ``cur.pos``; leave ``cur.pos`` at its value data.

    Every size is checked against the bytes that remain before anything is sliced
    (``cur.need``/``skip``); problems raise ``cur``'s error with the file offset.
    """
    start = cur.pos
    cur.need(16, "raw header")
    word = cur.unpack(order + "8xQ", "raw header")[0]
    cur.pos = start
    version = word & 0xFFFFFFFF
    if version not in RAW_HEADER:
        supported = ", ".join(str(v) for v in RAW_VERSIONS)
        raise cur.fail(
            "unsupported_version",
            f"raw profile version {version} (supported: {supported})",
            start + 8,
        )
    hdr = compile_layout(RAW_HEADER[version], order, 8)
    values = cur.unpack(hdr.struct.format, f"raw v{version} header")
    h = {name: values[i] for name, (i, _) in hdr.index.items()}
    kind = ProfileKind.from_version_word(word)

    ids_size = h.get("binary_ids_size", 0)
    if ids_size % 8:
        raise cur.fail("malformed", f"binary IDs size {ids_size} is not a multiple of 8")
    ids = _span(cur, ids_size, "binary IDs")
    record = compile_layout(RAW_RECORD[version], order, psize)
    data = _span(cur, h["num_data"] * record.size, "data-record section")
    cur.skip(h["padding_before_counters"], "padding before counters")
    cell = 1 if kind & ProfileKind.SINGLE_BYTE_COVERAGE else 8
    counters = _span(cur, h["num_counters"] * cell, "counter section")
    cur.skip(h["padding_after_counters"], "padding after counters")
    bitmap = _span(cur, h.get("num_bitmap_bytes", 0), "bitmap section")
    cur.skip(h.get("padding_after_bitmap", 0), "padding after bitmap bytes")
    num_uniform = h.get("num_uniform_counters", 0)
    cur.skip(num_uniform * 8, "uniform-counter section")
    cur.skip(h.get("padding_after_uniform", 0), "padding after uniform counters")
    names = _span(cur, h["names_size"], "names section")
    cur.skip(padding(h["names_size"]), "padding after names")
    vt_size = compile_layout(VTABLE_RECORD, order, psize).size
    vtables = _span(cur, h.get("num_vtables", 0) * vt_size, "vtable section")
    cur.skip(padding(vtables[1] - vtables[0]), "padding after vtables")
    vnames = _span(cur, h.get("vnames_size", 0), "vtable-names section")
    cur.skip(padding(h.get("vnames_size", 0)), "padding after vtable names")
    return RawSections(
        start, version, word, kind, h, hdr.size, record,
        ids, data, counters, bitmap, names, vtables, vnames, cur.pos,
    )  # fmt: skip


def _span(cur: Cursor, size: int, what: str) -> Span:
    begin = cur.pos
    cur.skip(size, what)
    return begin, cur.pos


def next_profile(cur: Cursor, magic: bytes) -> bool:
    """After one profile: skip zero padding; True if another profile follows.

    An executable and its instrumented shared libraries append whole profiles to one
    file; anything after the last one other than zero padding must be an 8-byte
    aligned header with the same magic.
    """
    data, end = cur.data, cur.end
    while cur.pos < end and data[cur.pos] == 0:
        cur.pos += 1
    if cur.pos >= end:
        return False
    if cur.pos % 8:
        raise cur.fail("malformed", "next profile is not 8-byte aligned")
    if bytes(data[cur.pos : cur.pos + 8]) != magic:
        raise cur.fail("bad_magic", "trailing data is not another profile with the same magic")
    return True


def written_for_correlation(data: bytes) -> bool:
    """Whether a raw file holds counters but no function records (its first profile).

    Such files are written with ``-profile-correlate=binary|debug-info`` (or LLVM 14-16's
    ``-debug-info-correlate``): records and names stay in the binary. Binary-mode files
    carry no flag saying so, hence this test on the header's counts.
    """
    from profkit.errors import ProfileFormatError
    from profkit.formats.instrprof.magics import RAW_MAGICS

    layout = RAW_MAGICS.get(bytes(data[:8]))
    if layout is None:
        return False
    try:
        where = locate(Cursor(data, error=ProfileFormatError), *layout)
    except ProfileFormatError:
        return False
    return where.num_data == 0 and where.header["num_counters"] > 0
