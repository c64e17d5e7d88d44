"""The "shape" of a raw file: what must be equal for two files to merge as arrays.

:func:`probe` walks the profiles of a raw file (one, or an executable's followed by
its shared libraries') with the reader's own walker (:mod:`..raw_sections`, so both
agree on every offset and padding rule), records where the parts that
vary between runs live (counters, bitmap bytes, value blocks), and fingerprints the
rest with run-time addresses masked. Used by :mod:`~profkit.formats.instrprof.merge.raw_arrays`.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

import numpy as np

from profkit.errors import ProfileFormatError
from profkit.formats._binary import Cursor
from profkit.formats.instrprof.layouts import RAW_HEADER, RELATIVE_POINTERS_FROM, compile_layout
from profkit.formats.instrprof.magics import RAW_MAGICS
from profkit.formats.instrprof.model import ProfileKind
from profkit.formats.instrprof.raw_sections import locate, next_profile

#: Raw variants the array path does not take (counters are bytes, carry timestamps, or
#: the data lives elsewhere).
SLOW_KINDS = ProfileKind.SINGLE_BYTE_COVERAGE | ProfileKind.TEMPORAL | ProfileKind.DEBUG_CORRELATE


@dataclass
class Segment:
    """One profile inside a raw file (an executable's, or one shared library's)."""

    counters: tuple[int, int]  # absolute byte range
    bitmap: tuple[int, int]
    data_pos: int
    num_data: int
    rec_size: int
    # byte offsets inside a data record
    name_off: int
    fptr_off: int
    counter_ptr_off: int
    bitmap_ptr_off: int  # -1 when the version has no bitmaps
    counters_delta: int
    bitmap_delta: int
    value_records: list[int]  # indexes (within the segment) of records with a value block
    value_start: int
    end: int  # where the segment's value blocks end


@dataclass
class RawShape:
    """Where one raw file keeps what varies between runs, plus its shape fingerprint."""

    key: bytes  # a quick fingerprint of ``parts``; equal keys are confirmed on ``parts``
    parts: bytes  # everything that must be equal between files of one shape
    kind: ProfileKind
    order: str
    psize: int
    segments: list[Segment]

    @property
    def num_data(self) -> int:
        return sum(seg.num_data for seg in self.segments)


#: More profiles than this in one file (exe + shared libraries) take the record path.
MAX_SEGMENTS = 256


def probe(data: bytes) -> RawShape | None:
    """The shape of a raw file the fast path can take, else None.

    A file may hold several profiles back to back (an executable and its instrumented
    shared libraries); each becomes a :class:`Segment`, and all must qualify.
    """
    magic = bytes(data[:8])
    if magic not in RAW_MAGICS or len(data) < 16:
        return None
    order, psize = RAW_MAGICS[magic]
    segments: list[Segment] = []
    parts: list[bytes] = []
    kind = ProfileKind.NONE
    cur = Cursor(data, 0, error=ProfileFormatError)
    try:
        while not segments or next_profile(cur, magic):
            if len(segments) >= MAX_SEGMENTS:
                return None
            if segments:
                parts.append(cur.pos.to_bytes(8, "little"))
            found = _probe_segment(data, cur.pos, order, psize, parts)
            if found is None:
                return None
            segment, seg_kind = found
            segments.append(segment)
            kind |= seg_kind
            cur.pos = segment.end
    except ProfileFormatError:
        return None
    joined = b"".join(parts)
    key = zlib.crc32(joined).to_bytes(4, "little") + len(joined).to_bytes(8, "little")
    return RawShape(key, joined, kind, order, psize, segments)


def _probe_segment(
    data: bytes, start: int, order: str, psize: int, parts: list[bytes]
) -> tuple[Segment, ProfileKind] | None:
    cur = Cursor(data, start, error=ProfileFormatError)
    try:
        where = locate(cur, order, psize)
    except ProfileFormatError:
        return None  # the record path reports it
    version, kind, h = where.version, where.kind, where.header
    if version < RELATIVE_POINTERS_FROM or kind & SLOW_KINDS:
        return None  # absolute pointers before v8 differ from run to run
    if h.get("num_vtables", 0) or h.get("num_uniform_counters", 0):
        return None
    rec = where.record
    offs = rec.offsets
    data_pos = where.data[0]
    counters, bitmap = where.counters, where.bitmap
    if counters[0] % 8:
        return None
    pos = where.values
    value_start = pos
    records = np.frombuffer(data, np.uint8, h["num_data"] * rec.size, data_pos).reshape(
        h["num_data"], rec.size
    )
    n_kinds = rec.index["num_value_sites"][1]
    vs_off = offs["num_value_sites"]
    sites = np.frombuffer(
        records[:, vs_off : vs_off + 2 * n_kinds].tobytes(), np.dtype(order + "u2")
    ).reshape(-1, n_kinds)
    value_records = np.flatnonzero(sites.any(axis=1)).tolist()
    # Walk the value blocks by their sizes to find where this profile ends.
    vpos = value_start
    for _ in value_records:
        if vpos + 8 > len(data):
            return None
        total = struct.unpack_from(order + "I", data, vpos)[0]
        if total < 8 or total % 8:
            return None
        vpos += total
    if vpos > len(data):
        return None
    # The fingerprint: everything but counters, bitmap, value blocks and run-time addresses.
    masked = records.copy()
    for name in ("function_ptr", "values"):
        masked[:, offs[name] : offs[name] + psize] = 0
    header = bytearray(data[start : start + where.header_size])
    volatile = ["names_delta"]  # an absolute address
    if not h.get("num_bitmap_bytes", 0) and "bitmap_delta" in h:
        volatile.append("bitmap_delta")  # no bitmap section: 0 − DataBegin, run-dependent
    for name in volatile:
        at = compile_layout(RAW_HEADER[version], order, psize).offsets[name]
        header[at : at + 8] = bytes(8)
    parts += (
        bytes(header),
        data[start + where.header_size : data_pos],
        masked.tobytes(),
        data[counters[1] : bitmap[0]],
        data[bitmap[1] : value_start],
    )
    segment = Segment(
        counters=counters,
        bitmap=bitmap,
        data_pos=data_pos,
        num_data=h["num_data"],
        rec_size=rec.size,
        name_off=offs["name_ref"],
        fptr_off=offs["function_ptr"],
        counter_ptr_off=offs["counter_ptr"],
        bitmap_ptr_off=offs.get("bitmap_ptr", -1),
        counters_delta=h["counters_delta"],
        bitmap_delta=h.get("bitmap_delta", 0),
        value_records=value_records,
        value_start=value_start,
        end=vpos,
    )
    return segment, kind


def column(data: bytes, shape: RawShape, seg: Segment, offset: int, width: int) -> np.ndarray:
    """One field of every data record of ``seg`` as an array (file byte order decoded)."""
    recs = np.frombuffer(data, np.uint8, seg.num_data * seg.rec_size, seg.data_pos)
    col = recs.reshape(seg.num_data, seg.rec_size)[:, offset : offset + width]
    code = {8: "u8", 4: "u4", 2: "u2"}[width]
    return np.frombuffer(col.tobytes(), np.dtype(shape.order + code))
