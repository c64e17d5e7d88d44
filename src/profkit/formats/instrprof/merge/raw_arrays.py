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

from dataclasses import dataclass, field

import numpy as np

from profkit.errors import ProfileFormatError
from profkit.formats._binary import Cursor
from profkit.formats.instrprof.merge.raw_shape import RawShape, Segment, column, probe
from profkit.formats.instrprof.merge.records import (
    COUNTER_OVERFLOW,
    MAX_COUNT,
    U64_MAX,
    Warn,
    merge_value_sites,
    scale_and_sort_sites,
)
from profkit.formats.instrprof.model import Profile, ValueKind, ValueSite
from profkit.formats.instrprof.raw import parse_raw
from profkit.formats.instrprof.values import read_value_block

__all__ = ["RawShape", "Segment", "ShapeAccumulator", "probe"]

_MAX = np.uint64(MAX_COUNT)
_U64MAX = np.uint64(U64_MAX)

Sites = dict[ValueKind, list[ValueSite]]


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
                fptrs = column(data, shape, seg, seg.fptr_off, shape.psize)
                names = column(data, shape, seg, seg.name_off, 8)
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
            cptr = column(data, shape, seg, seg.counter_ptr_off, shape.psize).astype(np.uint64)
            local = ((cptr - np.uint64(seg.counters_delta) + rel) & pmask) // np.uint64(8)
            offsets.extend((local + np.uint64(counter_base)).tolist())
            if seg.bitmap_ptr_off >= 0 and seg.bitmap[1] > seg.bitmap[0]:
                bptr = column(data, shape, seg, seg.bitmap_ptr_off, shape.psize).astype(np.uint64)
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
