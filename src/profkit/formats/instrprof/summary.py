"""Profile summaries computed from records, exactly as LLVM's ``InstrProfSummaryBuilder`` does.

The indexed writer stores these numbers and ``show`` prints them, so the arithmetic
must match LLVM bit for bit (spec §5.2): unsigned 64-bit totals that wrap, a 32-bit
block counter, a count→frequency histogram walked from the largest count down, and
cutoff thresholds computed in 128-bit integer math (Python ints are exact, so only the
wrap-arounds need care).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from itertools import chain
from operator import itemgetter

from profkit.formats.instrprof.model import (
    CS_FLAG_IN_FUNC_HASH,
    FunctionRecord,
    Summary,
    SummaryEntry,
)

#: ``ProfileSummaryBuilder::DefaultCutoffs`` (parts per million).
DEFAULT_CUTOFFS: tuple[int, ...] = (
    10000,
    100000,
    200000,
    300000,
    400000,
    500000,
    600000,
    700000,
    800000,
    900000,
    950000,
    990000,
    999000,
    999900,
    999990,
    999999,
)

#: ``ProfileSummary::Scale``: cutoffs are parts per million.
SCALE = 1_000_000

_M64 = (1 << 64) - 1
_M32 = (1 << 32) - 1
#: ``InstrProfRecord::PseudoHot`` / ``PseudoWarm`` first-counter markers: such records are skipped.
_PSEUDO_COUNTS = frozenset({_M64, _M64 - 1})


class SummaryBuilder:
    """Accumulates records into one summary (one builder for plain, one for CS records).

    Records are only collected by :meth:`add_counts` and folded in :meth:`build` with
    a few C-level passes, which matters for files with tens of thousands of records.
    The counter lists are kept by reference: do not modify them before ``build``.
    """

    __slots__ = ("_lists",)

    def __init__(self) -> None:
        self._lists: list[Sequence[int]] = []

    def add_counts(self, counts: Sequence[int]) -> None:
        """Add one record's counters: the first is the entry count, the rest internal."""
        if counts and counts[0] not in _PSEUDO_COUNTS:
            self._lists.append(counts)

    def sink(self) -> Callable[[Sequence[int]], None]:
        """An ``append`` for counter lists the caller has already checked (non-empty, no
        PseudoHot/PseudoWarm first counter): ``show`` tests the first counter anyway, so
        it skips :meth:`add_counts`' second test and method call per record."""
        return self._lists.append

    def build(self, cutoffs: Iterable[int] = DEFAULT_CUTOFFS) -> Summary:
        """The finished summary (the six fields the indexed format stores, plus entries)."""
        lists = self._lists
        cutoff_list = list(cutoffs)
        flat = list(chain.from_iterable(lists))
        total = sum(flat) & _M64
        max_block = max(flat, default=0)
        # The largest internal (non-entry) count: blank each list's entry count in a copy
        # of ``flat`` (counts are unsigned, so 0 never wins) instead of slicing every list.
        internal = flat.copy()
        at = 0
        for c in lists:
            internal[at] = 0
            at += len(c)
        return Summary(
            total_num_functions=len(lists) & _M32,
            total_num_blocks=len(flat) & _M32,
            max_function_count=max(map(itemgetter(0), lists), default=0),
            max_block_count=max_block,
            max_internal_block_count=max(internal, default=0),
            total_block_count=total,
            # The histogram is only needed for cutoffs (``show`` without
            # --detailed-summary asks for none).
            entries=detailed_entries(Counter(flat), total, cutoff_list) if cutoff_list else [],
        )


def detailed_entries(
    freq: Counter[int], total_count: int, cutoffs: Iterable[int] = DEFAULT_CUTOFFS
) -> list[SummaryEntry]:
    """``ProfileSummaryBuilder::computeDetailedSummary``: one entry per cutoff (sorted).

    The walk state (count, blocks seen, running sum) carries over from one cutoff to
    the next, and sums wrap at 64 bits as in C++.
    """
    items = sorted(freq.items(), reverse=True)
    n = len(items)
    i = 0
    seen = 0
    cur_sum = 0
    count = 0
    out: list[SummaryEntry] = []
    for cutoff in sorted(cutoffs):
        desired = (total_count * cutoff // SCALE) & _M64
        while cur_sum < desired and i < n:
            count, f = items[i]
            cur_sum = (cur_sum + count * f) & _M64
            seen = (seen + f) & _M32
            i += 1
        out.append(SummaryEntry(cutoff, count, seen))
    return out


def compute_summary(
    records: Iterable[FunctionRecord], cutoffs: Iterable[int] = DEFAULT_CUTOFFS
) -> tuple[Summary, Summary]:
    """The (regular, context-sensitive) summaries of ``records``, as the indexed writer stores them.

    Records with FuncHash bit 60 feed the CS summary, all others the regular one.
    """
    cutoff_list = list(cutoffs)
    regular = SummaryBuilder()
    cs = SummaryBuilder()
    for rec in records:
        (cs if rec.hash & CS_FLAG_IN_FUNC_HASH else regular).add_counts(rec.counts)
    return regular.build(cutoff_list), cs.build(cutoff_list)
