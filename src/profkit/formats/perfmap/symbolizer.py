"""Address → symbol over any number of perf maps, in O(log n), one at a time or in batch.

Maps are added with a *source* label: absolute perf-PID.map files as they are, r2rmaps
with the load base of their image (RVA + base). On the first lookup after an ``add`` the
entries are compiled into one sorted, non-overlapping table of segments, each owned by
exactly one entry, so a lookup is a single binary search.

Overlap rule (perf leaves it unspecified, spec §2.2/§2.3; we need a deterministic one):

1. Ranges are half-open, ``[start, start + size)``; a zero-size entry covers only its
   start address (as in perf).
2. Where ranges overlap, the **smallest** range containing the address wins: a nested
   range (a stub inside a method, a cold part inside a larger blob) is the more specific
   answer.
3. Among ranges of equal size (identical duplicates, re-JIT at a reused address), the
   entry **added last** wins: maps are added in the order given and each map's lines in
   file order, and a later perf-map line describes newer code at that address.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from profkit.formats.perfmap.perfpid import PerfMap
from profkit.formats.perfmap.r2rmap import R2RPerfMap

U64_MAX = (1 << 64) - 1
#: seg_starts, seg_ends, seg_entry, starts, sizes, source_of as Python lists.
_Lists = tuple[list[int], list[int], list[int], list[int], list[int], list[int]]
_SORT_THRESHOLD = 4096


class Symbol(NamedTuple):
    """A resolved address: the symbol's name, the offset into it, and where it came from."""

    name: str
    offset: int
    source: str
    start: int
    size: int

    def label(self) -> str:
        """``name+0xOFFSET``, the form perf prints with symbol offsets."""
        return f"{self.name}+0x{self.offset:x}"


@dataclass(frozen=True)
class BatchLookup:
    """Per-address results of :meth:`Symbolizer.lookup_many` as arrays.

    ``entries[i]`` is the winning entry's index (-1: not found), ``offsets[i]`` the offset
    into it (0 when not found). Use :meth:`Symbolizer.symbols` for Python objects.
    """

    addresses: np.ndarray
    entries: np.ndarray
    offsets: np.ndarray

    @property
    def found(self) -> np.ndarray:
        return self.entries >= 0


class Symbolizer:
    """Resolve addresses against the entries of every map added."""

    def __init__(self) -> None:
        self._starts: list[np.ndarray] = []
        self._sizes: list[np.ndarray] = []
        self._name_chunks: list[Sequence[str]] = []
        self._chunk_first: list[int] = []
        self._count = 0
        self._sources: list[str] = []
        self._source_of: list[np.ndarray] = []
        self._compiled: _Table | None = None

    def __len__(self) -> int:
        return self._count

    def name(self, entry: int) -> str:
        """The name of entry ``entry`` (maps keep their own, possibly lazy, name columns)."""
        if len(self._name_chunks) == 1:
            return self._name_chunks[0][entry]
        i = bisect.bisect_right(self._chunk_first, entry) - 1
        return self._name_chunks[i][entry - self._chunk_first[i]]

    @property
    def sources(self) -> list[str]:
        """The source labels, in the order their maps were added."""
        return list(self._sources)

    def add(self, starts: np.ndarray, sizes: np.ndarray, names: Sequence[str], source: str) -> None:
        """Add absolute ranges (uint64 columns) named ``names``, labelled ``source``."""
        if not (len(starts) == len(sizes) == len(names)):
            raise ValueError("starts, sizes and names differ in length")
        self._starts.append(np.asarray(starts, dtype=np.uint64))
        self._sizes.append(np.asarray(sizes, dtype=np.uint64))
        if len(names):
            self._chunk_first.append(self._count)
            self._name_chunks.append(names)
            self._count += len(names)
        self._source_of.append(np.full(len(names), len(self._sources), dtype=np.int32))
        self._sources.append(source)
        self._compiled = None

    def add_perf_map(self, perfmap: PerfMap, source: str = "perf map") -> None:
        """Add a perf-PID.map (absolute addresses)."""
        self.add(perfmap.starts, perfmap.sizes, perfmap.names, source)

    def add_r2rmap(self, perfmap: R2RPerfMap, base: int, source: str = "r2rmap") -> None:
        """Add an r2rmap whose image is loaded at ``base`` (address = base + RVA)."""
        if not 0 <= base <= U64_MAX:
            raise ValueError(f"load base {base:#x} is not a 64-bit address")
        if len(perfmap) and base + int(perfmap.rvas.max()) > U64_MAX:
            raise ValueError(f"load base {base:#x} puts the map past the 64-bit address space")
        self.add(perfmap.rvas + np.uint64(base), perfmap.lengths, perfmap.names, source)

    # -- lookups ----------------------------------------------------------------------

    def lookup(self, address: int) -> Symbol | None:
        """The symbol containing ``address`` (see the module doc for overlaps), or None."""
        seg_starts, seg_ends, seg_entry, starts, sizes, source_of = self._table().lists()
        i = bisect.bisect_right(seg_starts, address) - 1
        if i < 0 or address >= seg_ends[i]:
            return None
        entry = seg_entry[i]
        start = starts[entry]
        return Symbol(
            self.name(entry),
            address - start,
            self._sources[source_of[entry]],
            start,
            sizes[entry],
        )

    def lookup_many(self, addresses: np.ndarray | list[int]) -> BatchLookup:
        """Vectorized lookup (numpy ``searchsorted``); the answer for each address, in order."""
        table = self._table()
        addrs = np.asarray(addresses, dtype=np.uint64)
        if not len(table.seg_starts):
            empty = np.full(len(addrs), -1, dtype=np.int64)
            return BatchLookup(addrs, empty, np.zeros(len(addrs), dtype=np.uint64))
        # Random queries make searchsorted miss the cache on every probe; sorting them
        # first (and scattering the answers back) is ~3x faster for big batches.
        order = np.argsort(addrs) if len(addrs) >= _SORT_THRESHOLD else None
        keys = addrs[order] if order is not None else addrs
        pos = np.searchsorted(table.seg_starts, keys, side="right") - 1
        clipped = np.maximum(pos, 0)
        hit = (pos >= 0) & (keys < table.seg_ends[clipped])
        entries = np.where(hit, table.seg_entry[clipped], -1).astype(np.int64, copy=False)
        offsets = np.where(hit, keys - table.seg_entry_start[clipped], np.uint64(0))
        offsets = offsets.astype(np.uint64, copy=False)
        if order is not None:
            entries_out = np.empty_like(entries)
            entries_out[order] = entries
            offsets_out = np.empty_like(offsets)
            offsets_out[order] = offsets
            entries, offsets = entries_out, offsets_out
        return BatchLookup(addrs, entries, offsets)

    def symbol(self, entry: int, address: int | None = None) -> Symbol:
        """The :class:`Symbol` for entry index ``entry`` (offset relative to ``address``)."""
        *_, starts, sizes, source_of = self._table().lists()
        start = starts[entry]
        return Symbol(
            self.name(entry),
            0 if address is None else address - start,
            self._sources[source_of[entry]],
            start,
            sizes[entry],
        )

    def symbols(self, batch: BatchLookup) -> list[Symbol | None]:
        """Materialize a batch result as :class:`Symbol` objects (None where not found)."""
        out: list[Symbol | None] = []
        for entry, address in zip(batch.entries.tolist(), batch.addresses.tolist(), strict=True):
            out.append(None if entry < 0 else self.symbol(entry, address))
        return out

    def _table(self) -> _Table:
        if self._compiled is None:
            self._compiled = _compile(self._starts, self._sizes, self._source_of)
        return self._compiled


class _Table:
    """Compiled lookup structure: disjoint sorted segments → entry index."""

    def __init__(
        self,
        starts: np.ndarray,
        sizes: np.ndarray,
        source_of: np.ndarray,
        seg_starts: np.ndarray,
        seg_ends: np.ndarray,
        seg_entry: np.ndarray,
    ) -> None:
        self.starts = starts
        self.sizes = sizes
        self.source_of = source_of
        self.seg_starts = seg_starts
        self.seg_ends = seg_ends
        self.seg_entry = seg_entry
        self.seg_entry_start = starts[seg_entry]
        self._lists: _Lists | None = None

    def lists(self) -> _Lists:
        """Python-list twins, built on first use: for one-at-a-time lookups, ``bisect`` on
        a list and list indexing beat a numpy call (and numpy scalars) per address."""
        if self._lists is None:
            self._lists = (
                self.seg_starts.tolist(),
                self.seg_ends.tolist(),
                self.seg_entry.tolist(),
                self.starts.tolist(),
                self.sizes.tolist(),
                self.source_of.tolist(),
            )
        return self._lists


def _effective_ends(starts: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """``start + max(size, 1)``, saturating at 2**64 - 1 instead of wrapping."""
    eff = np.maximum(sizes, np.uint64(1))
    room = np.uint64(U64_MAX) - starts
    return np.where(eff > room, np.uint64(U64_MAX), starts + np.minimum(eff, room))


def _compile(
    starts_parts: list[np.ndarray], sizes_parts: list[np.ndarray], source_parts: list[np.ndarray]
) -> _Table:
    starts = np.concatenate(starts_parts) if starts_parts else np.zeros(0, np.uint64)
    sizes = np.concatenate(sizes_parts) if sizes_parts else np.zeros(0, np.uint64)
    source_of = np.concatenate(source_parts) if source_parts else np.zeros(0, np.int32)
    ends = _effective_ends(starts, sizes)
    index = np.arange(len(starts), dtype=np.int64)
    # Sort by start, then by end, then by load order: the last of a group of identical
    # ranges is the one rule 3 keeps.
    order = np.lexsort((index, ends, starts))
    s, e = starts[order], ends[order]
    if len(order) > 1:
        same_as_next = (s[:-1] == s[1:]) & (e[:-1] == e[1:])
        keep = np.append(~same_as_next, True)
        order, s, e = order[keep], s[keep], e[keep]
    if len(order) < 2 or bool(np.all(e[:-1] <= s[1:])):
        return _Table(starts, sizes, source_of, s, e, order)
    # Only clusters of mutually overlapping ranges need the sweep; a range that overlaps
    # nothing is its own segment. A cluster starts where a start reaches past every
    # earlier end.
    reach = np.maximum.accumulate(e)
    new_cluster = np.ones(len(s), dtype=bool)
    new_cluster[1:] = s[1:] >= reach[:-1]
    cluster = np.cumsum(new_cluster) - 1
    alone = np.bincount(cluster)[cluster] == 1
    sw_s, sw_e, sw_n = _sweep(s[~alone], e[~alone], order[~alone])
    seg_s = np.concatenate((s[alone], sw_s))
    seg_e = np.concatenate((e[alone], sw_e))
    seg_n = np.concatenate((order[alone].astype(np.int64), sw_n))
    by_start = np.argsort(seg_s, kind="stable")
    return _Table(starts, sizes, source_of, seg_s[by_start], seg_e[by_start], seg_n[by_start])


def _sweep(
    s: np.ndarray, e: np.ndarray, order: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Split overlapping ranges into disjoint segments owned by the rule's winner.

    A sweep over all range boundaries with a heap of the ranges open at that point,
    keyed (size, -load order): O(n log n). Only runs when ranges really overlap.
    """
    starts, ends, ids = s.tolist(), e.tolist(), order.tolist()
    bounds = sorted(set(starts) | set(ends))
    heap: list[tuple[int, int, int, int]] = []
    seg_s: list[int] = []
    seg_e: list[int] = []
    seg_n: list[int] = []
    j, n = 0, len(starts)
    for k in range(len(bounds) - 1):
        pos, nxt = bounds[k], bounds[k + 1]
        while j < n and starts[j] == pos:
            heapq.heappush(heap, (ends[j] - starts[j], -ids[j], ends[j], ids[j]))
            j += 1
        while heap and heap[0][2] <= pos:
            heapq.heappop(heap)
        if not heap:
            continue
        winner = heap[0][3]
        if seg_n and seg_n[-1] == winner and seg_e[-1] == pos:
            seg_e[-1] = nxt
        else:
            seg_s.append(pos)
            seg_e.append(nxt)
            seg_n.append(winner)
    return (
        np.array(seg_s, dtype=np.uint64),
        np.array(seg_e, dtype=np.uint64),
        np.array(seg_n, dtype=np.int64),
    )
