"""Fast merging of many raw profiles written by the *same* binary (the common case).

Runs of one program write raw files that differ only in their counter and bitmap
sections, in the value-profile blocks, and in the few fields that hold run-time
addresses (function pointers, the names address) — the header, data records and names
are the same. So instead of decoding every file into records, :func:`probe` finds the
sections, fingerprints everything that must be equal ("shape"), and
:class:`ShapeAccumulator` adds the counter sections as whole numpy arrays, ORs the
bitmaps, and merges only the value sites. One file per shape is decoded in full by the
ordinary raw reader (which also validates it), and its records get the summed counters.

The result equals the serial record-by-record merge: counters are added with the same
saturation and clamping, value sites go through the same merge functions, and a file
whose shape differs, or that has anything unusual (byte counters, temporal profiles,
vtables, counters near 2^64), takes the ordinary path. A file holding several profiles
(executable + shared libraries) is handled profile by profile (:class:`Segment`).
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field

import numpy as np

from profkit.errors import ProfileFormatError
from profkit.formats._binary import Cursor
from profkit.formats.instrprof.layouts import (
    RAW_HEADER,
    RAW_RECORD,
    RELATIVE_POINTERS_FROM,
    compile_layout,
)
from profkit.formats.instrprof.merge import (
    COUNTER_OVERFLOW,
    MAX_COUNT,
    U64_MAX,
    Warn,
    merge_value_sites,
    scale_and_sort_sites,
)
from profkit.formats.instrprof.model import Profile, ProfileKind, ValueKind, ValueSite
from profkit.formats.instrprof.raw import RAW_MAGICS, parse_raw
from profkit.formats.instrprof.values import read_value_block

_SLOW_KINDS = ProfileKind.SINGLE_BYTE_COVERAGE | ProfileKind.TEMPORAL | ProfileKind.DEBUG_CORRELATE
_MAX = np.uint64(MAX_COUNT)
_U64MAX = np.uint64(U64_MAX)

Sites = dict[ValueKind, list[ValueSite]]


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


def _field_offsets(fields: tuple[str, ...], order: str, psize: int) -> dict[str, int]:
    """Byte offset of every field of a record layout (natural alignment, as layouts.py)."""
    sizes = {"Q": 8, "I": 4, "H": 2, "B": 1, "P": psize}
    out: dict[str, int] = {}
    off = 0
    for spec in fields:
        name, code = spec.split(":")
        count = int(code[:-1] or 1)
        size = sizes[code[-1]]
        off += -off % size
        out[name] = off
        off += size * count
    return out


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
    pos = 0
    while True:
        found = _probe_segment(data, pos, order, psize, parts)
        if found is None:
            return None
        segment, seg_kind = found
        segments.append(segment)
        kind |= seg_kind
        pos = segment.end
        while pos < len(data) and data[pos] == 0:  # padding between profiles
            pos += 1
        if pos >= len(data):
            break
        if pos % 8 or bytes(data[pos : pos + 8]) != magic or len(segments) >= MAX_SEGMENTS:
            return None
        parts.append(pos.to_bytes(8, "little"))
    joined = b"".join(parts)
    key = zlib.crc32(joined).to_bytes(4, "little") + len(joined).to_bytes(8, "little")
    return RawShape(key, joined, kind, order, psize, segments)


def _probe_segment(
    data: bytes, start: int, order: str, psize: int, parts: list[bytes]
) -> tuple[Segment, ProfileKind] | None:
    if start + 16 > len(data):
        return None
    word = struct.unpack_from(order + "Q", data, start + 8)[0]
    version = word & 0xFFFFFFFF
    if version not in RAW_HEADER or version < RELATIVE_POINTERS_FROM:
        return None  # absolute pointers before v8 differ from run to run
    kind = ProfileKind.from_version_word(word)
    if kind & _SLOW_KINDS:
        return None
    hdr = compile_layout(RAW_HEADER[version], order, 8)
    if start + hdr.size > len(data):
        return None
    values = hdr.struct.unpack_from(data, start)
    h = {name: values[i] for name, (i, _) in hdr.index.items()}
    if h.get("num_vtables", 0) or h.get("num_uniform_counters", 0):
        return None
    rec_fields = RAW_RECORD[version]
    rec = compile_layout(rec_fields, order, psize)
    offs = _field_offsets(rec_fields, order, psize)
    pos = start + hdr.size + h.get("binary_ids_size", 0)
    data_pos = pos
    pos += h["num_data"] * rec.size + h["padding_before_counters"]
    counters = (pos, pos + h["num_counters"] * 8)
    pos = counters[1] + h["padding_after_counters"]
    bitmap = (pos, pos + h.get("num_bitmap_bytes", 0))
    pos = bitmap[1] + h.get("padding_after_bitmap", 0)
    pos += h["names_size"]
    pos += -(pos - start) % 8
    pos += h.get("vnames_size", 0)
    pos += -(pos - start) % 8
    if pos > len(data) or counters[0] % 8:
        return None
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
    header = bytearray(data[start : start + hdr.size])
    volatile = ["names_delta"]  # an absolute address
    if not h.get("num_bitmap_bytes", 0) and hdr.has("bitmap_delta"):
        volatile.append("bitmap_delta")  # no bitmap section: 0 − DataBegin, run-dependent
    for name in volatile:
        at = 8 * hdr.pos(name)
        header[at : at + 8] = bytes(8)
    parts += (
        bytes(header),
        data[start + hdr.size : data_pos],
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


def _column(data: bytes, shape: RawShape, seg: Segment, offset: int, width: int) -> np.ndarray:
    recs = np.frombuffer(data, np.uint8, seg.num_data * seg.rec_size, seg.data_pos)
    col = recs.reshape(seg.num_data, seg.rec_size)[:, offset : offset + width]
    code = {8: "u8", 4: "u4", 2: "u2"}[width]
    return np.frombuffer(col.tobytes(), np.dtype(shape.order + code))


def _weighted(counts: np.ndarray, weight: int) -> tuple[np.ndarray, bool]:
    if weight == 1:
        return counts, False
    over = counts > np.uint64(U64_MAX // weight)
    out = counts * np.uint64(weight)
    out[over] = _U64MAX
    clamp = out > _MAX
    if clamp.any():
        out[clamp] = _MAX
        return out, True
    return out, False


def _sat_add(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, bool]:
    total = a + b
    wrapped = total < a
    if wrapped.any():
        total[wrapped] = _U64MAX
    clamp = total > _MAX
    if clamp.any():
        total[clamp] = _MAX
        return total, True
    return total, False


@dataclass
class ShapeAccumulator:
    """The running merge of every file of one shape (picklable, small)."""

    shape: RawShape
    first_path: str
    counters: np.ndarray
    bitmap: np.ndarray
    values: dict[int, Sites] = field(default_factory=dict)
    files: int = 0

    @classmethod
    def start(
        cls, shape: RawShape, path: str, data: bytes, weight: int, warn: Warn
    ) -> ShapeAccumulator:
        acc = cls(shape, path, np.zeros(0, np.uint64), np.zeros(0, np.uint8))
        counts = acc._counts(data)
        acc.counters, overflow = _weighted(counts.copy() if weight == 1 else counts, weight)
        if overflow:
            warn(f"{path}: {COUNTER_OVERFLOW}")
        acc.bitmap = acc._bitmap(data).copy()
        for index, sites in acc._value_blocks(data, path).items():
            acc.values[index] = scale_and_sort_sites(sites, weight, warn)
        acc.files = 1
        return acc

    def _counts(self, data: bytes) -> np.ndarray:
        dtype = np.dtype(self.shape.order + "u8")
        pieces = [
            np.frombuffer(data, dtype, (b - a) // 8, a)
            for a, b in (s.counters for s in self.shape.segments)
        ]
        counts = pieces[0] if len(pieces) == 1 else np.concatenate(pieces)
        if counts.size and counts.max() >= _MAX:
            raise _NotFast
        return counts.astype(np.uint64, copy=False)

    def _bitmap(self, data: bytes) -> np.ndarray:
        pieces = [
            np.frombuffer(data, np.uint8, b - a, a)
            for a, b in (s.bitmap for s in self.shape.segments)
        ]
        return pieces[0] if len(pieces) == 1 else np.concatenate(pieces)

    def _value_blocks(self, data: bytes, path: str) -> dict[int, Sites]:
        """Value sites by (file-wide) record index, targets resolved per profile."""
        shape = self.shape
        out: dict[int, Sites] = {}
        base = 0
        for seg in shape.segments:
            if seg.value_records:
                cur = Cursor(data, seg.value_start, path=path, error=ProfileFormatError)
                fptrs = _column(data, shape, seg, seg.fptr_off, shape.psize)
                names = _column(data, shape, seg, seg.name_off, 8)
                for index in seg.value_records:
                    sites = read_value_block(cur, shape.order, f"value data of record {index}")
                    _resolve_calls(sites, fptrs, names)
                    out[base + index] = sites
            base += seg.num_data
        return out

    def add_file(self, path: str, data: bytes, weight: int, warn: Warn) -> None:
        """Fold in another file of the same shape (decode everything before changing state)."""
        counts, over1 = _weighted(self._counts(data), weight)
        blocks = self._value_blocks(data, path)
        self.counters, over2 = _sat_add(self.counters, counts)
        if over1 or over2:
            warn(f"{path}: {COUNTER_OVERFLOW}")
        if self.bitmap.size:
            np.bitwise_or(self.bitmap, self._bitmap(data), out=self.bitmap)
        for index, sites in blocks.items():
            merge_value_sites(
                self.values.setdefault(index, {}), sites, weight, _Prefixed(warn, path)
            )
        self.files += 1

    def combine(self, other: ShapeAccumulator, warn: Warn) -> None:
        """Fold in another accumulator of the same shape (from another worker)."""
        self.counters, overflow = _sat_add(self.counters, other.counters)
        if overflow:
            warn(f"{other.first_path}: {COUNTER_OVERFLOW}")
        np.bitwise_or(self.bitmap, other.bitmap, out=self.bitmap)
        for index, sites in other.values.items():
            merge_value_sites(
                self.values.setdefault(index, {}), sites, 1, _Prefixed(warn, other.first_path)
            )
        self.files += other.files

    def materialize(self, data: bytes) -> Profile:
        """Decode the first file in full and give its records the merged data."""
        shape = self.shape
        profile = parse_raw(data, self.first_path)
        if len(profile.records) != shape.num_data:  # pragma: no cover - reader invariant
            raise ProfileFormatError("malformed", "record count changed", path=self.first_path)
        pmask = np.uint64((1 << (8 * shape.psize)) - 1)
        counters = self.counters.tolist()
        bitmap = self.bitmap.tobytes()
        offsets: list[int] = []
        boffs: list[int] = []
        counter_base = bitmap_base = 0
        for seg in shape.segments:
            rel = np.arange(seg.num_data, dtype=np.uint64) * np.uint64(seg.rec_size)
            cptr = _column(data, shape, seg, seg.counter_ptr_off, shape.psize).astype(np.uint64)
            local = ((cptr - np.uint64(seg.counters_delta) + rel) & pmask) // np.uint64(8)
            offsets.extend((local + np.uint64(counter_base)).tolist())
            if seg.bitmap_ptr_off >= 0 and seg.bitmap[1] > seg.bitmap[0]:
                bptr = _column(data, shape, seg, seg.bitmap_ptr_off, shape.psize).astype(np.uint64)
                local_b = (bptr - np.uint64(seg.bitmap_delta) + rel) & pmask
                boffs.extend((local_b + np.uint64(bitmap_base)).tolist())
            else:
                boffs.extend([0] * seg.num_data)
            counter_base += (seg.counters[1] - seg.counters[0]) // 8
            bitmap_base += seg.bitmap[1] - seg.bitmap[0]
        for record, off, boff in zip(profile.records, offsets, boffs, strict=True):
            record.counts = counters[off : off + len(record.counts)]
            if record.bitmap:
                record.bitmap = bitmap[boff : boff + len(record.bitmap)]
        for index, sites in self.values.items():
            profile.records[index].value_sites = sites
        return profile


def _resolve_calls(sites: Sites, fptrs: np.ndarray, names: np.ndarray) -> None:
    """Indirect-call targets: run-time address → NameRef of that profile's function (0 = unknown)."""
    calls = sites.get(ValueKind.INDIRECT_CALL_TARGET)
    if not calls:
        return
    resolved: dict[int, int] = {}
    for site in calls:
        for value, _ in site:
            if value not in resolved:
                hits = np.flatnonzero(fptrs == value) if value else ()
                resolved[value] = int(names[hits].min()) if len(hits) else 0
    sites[ValueKind.INDIRECT_CALL_TARGET] = [[(resolved[v], c) for v, c in site] for site in calls]


class _NotFast(Exception):
    """This file must take the ordinary path after all."""


class _Prefixed:
    __slots__ = ("path", "warn")

    def __init__(self, warn: Warn, path: str) -> None:
        self.warn = warn
        self.path = path

    def __call__(self, message: str) -> None:
        self.warn(f"{self.path}: {message}")
