"""How much two profiles overlap, computed as ``llvm-profdata overlap`` does (§7.4).

The arithmetic follows LLVM step by step in IEEE doubles and in the same order
(``OverlapStats::score`` = ``min(a / base_sum, b / test_sum)``, summed per record in the
test profile's reader order), so the percentages printed by
:mod:`profkit.present.instrprof.llvm_overlap` agree to the last digit. LLVM quirks kept
on purpose: the ``--cs`` switch only selects which records make up the
two *sums*; every test record is still compared; a test record whose hash is unknown
leaves an empty placeholder behind, so a second record with that hash is a mismatch.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from profkit.formats.instrprof.merge import ProfileMerger
from profkit.formats.instrprof.model import FunctionRecord, Profile, ValueKind

_M64 = (1 << 64) - 1
#: ``--value-cutoff`` default: ``(unsigned long long)-1``.
NO_CUTOFF = _M64


@dataclass
class CountSum:
    """``CountSumOrPercent``: a count sum, or (for overlap rows) a fraction."""

    num_entries: int = 0
    count_sum: float = 0.0
    value_counts: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0])


@dataclass
class OverlapStats:
    """``OverlapStats`` for the whole program or for one function."""

    base: CountSum = field(default_factory=CountSum)
    test: CountSum = field(default_factory=CountSum)
    overlap: CountSum = field(default_factory=CountSum)
    mismatch: CountSum = field(default_factory=CountSum)
    unique: CountSum = field(default_factory=CountSum)
    func_name: str = ""
    func_hash: int = 0
    valid: bool = False

    def add_one_mismatch(self, func: CountSum) -> None:
        self.mismatch.num_entries += 1
        self.mismatch.count_sum += func.count_sum / self.test.count_sum
        for k in range(3):
            if self.test.value_counts[k] >= 1.0:
                self.mismatch.value_counts[k] += func.value_counts[k] / self.test.value_counts[k]

    def add_one_unique(self, func: CountSum) -> None:
        self.unique.num_entries += 1
        self.unique.count_sum += func.count_sum / self.test.count_sum
        for k in range(3):
            if self.test.value_counts[k] >= 1.0:
                self.unique.value_counts[k] += func.value_counts[k] / self.test.value_counts[k]


@dataclass
class OverlapResult:
    """The program-level statistics plus the function-level ones that get printed."""

    program: OverlapStats
    functions: list[OverlapStats]
    #: Set when a profile's edge-count sum is 0: LLVM prints only this note.
    zero_sum_profile: str | None = None


def score(a: int, b: int, sum_a: float, sum_b: float) -> float:
    """``OverlapStats::score``."""
    if sum_a < 1.0 or sum_b < 1.0:
        return 0.0
    return min(float(a) / sum_a, float(b) / sum_b)


def accumulate(record: FunctionRecord, total: CountSum) -> None:
    """``InstrProfRecord::accumulateCounts``: 64-bit wrapping sums added as doubles."""
    total.num_entries += len(record.counts)
    total.count_sum += float(sum(record.counts) & _M64)
    for kind, sites in record.value_sites.items():
        total.value_counts[int(kind)] += float(sum(c for site in sites for _, c in site) & _M64)


def _program_sum(profile: Profile, cs: bool) -> CountSum:
    total = CountSum()
    functions = 0
    for record in profile.records:
        if profile.is_ir and record.is_cs != cs:
            continue
        accumulate(record, total)
        functions += 1
    total.num_entries = functions
    return total


def _num_sites(record: FunctionRecord, kind: ValueKind) -> int:
    return len(record.value_sites.get(kind, ()))


def _overlap_sites(
    base: FunctionRecord, test: FunctionRecord, program: OverlapStats, func: OverlapStats
) -> None:
    for kind in ValueKind:
        k = int(kind)
        for mine, theirs in zip(
            base.value_sites.get(kind, ()), test.value_sites.get(kind, ()), strict=False
        ):
            a = sorted(mine, key=lambda vc: vc[0])
            b = sorted(theirs, key=lambda vc: vc[0])
            s = fs = 0.0
            i = j = 0
            while i < len(a) and j < len(b):
                if a[i][0] == b[j][0]:
                    s += score(
                        a[i][1], b[j][1], program.base.value_counts[k], program.test.value_counts[k]
                    )
                    fs += score(
                        a[i][1], b[j][1], func.base.value_counts[k], func.test.value_counts[k]
                    )
                    i += 1
                elif a[i][0] < b[j][0]:
                    i += 1
                    continue
                j += 1
            program.overlap.value_counts[k] += s
            func.overlap.value_counts[k] += fs


def _overlap_record(
    base: FunctionRecord,
    test: FunctionRecord,
    program: OverlapStats,
    func: OverlapStats,
    cutoff: int,
) -> None:
    """``InstrProfRecord::overlap`` (``base`` is the writer's record, ``test`` the other)."""
    accumulate(base, func.base)
    mismatch = len(base.counts) != len(test.counts) or any(
        _num_sites(base, k) != _num_sites(test, k) for k in ValueKind
    )
    if mismatch:
        program.add_one_mismatch(func.test)
        return
    _overlap_sites(base, test, program, func)
    total = 0.0
    for a, b in zip(base.counts, test.counts, strict=True):
        total += score(a, b, program.base.count_sum, program.test.count_sum)
    max_count = max(test.counts, default=0)
    program.overlap.count_sum += total
    program.overlap.num_entries += 1
    if max_count >= cutoff:
        fscore = 0.0
        for a, b in zip(base.counts, test.counts, strict=True):
            fscore += score(a, b, func.base.count_sum, func.test.count_sum)
        func.overlap.count_sum = fscore
        func.overlap.num_entries = len(test.counts)
        func.valid = True


def overlap(
    base: Profile,
    test: Profile,
    *,
    cs: bool = False,
    function: str | None = None,
    value_cutoff: int = -1,
) -> OverlapResult:
    """Compare ``test`` against ``base`` like ``llvm-profdata overlap``.

    ``value_cutoff`` < 0 means LLVM's default (no function-level output unless
    ``function`` matches); ``function`` is a substring of names to report in detail.
    """
    program = OverlapStats(valid=True)
    program.base = _program_sum(base, cs)
    program.test = _program_sum(test, cs)
    if program.base.count_sum < 1.0:
        return OverlapResult(program, [], zero_sum_profile="base")
    if program.test.count_sum < 1.0:
        return OverlapResult(program, [], zero_sum_profile="test")
    cutoff_default = NO_CUTOFF if value_cutoff < 0 else value_cutoff
    # The base goes through the writer, which merges repeated (name, hash) records.
    merger = ProfileMerger()
    merger.add(base)
    table = merger.functions
    shown: list[OverlapStats] = []
    for record in test.records:
        func = OverlapStats(func_name=record.name, func_hash=record.hash)
        accumulate(record, func.test)
        by_hash = table.get(record.name)
        if by_hash is None:
            program.add_one_unique(func.test)
        elif func.test.count_sum < 1.0:
            program.overlap.num_entries += 1
        elif record.hash not in by_hash:
            by_hash[record.hash] = FunctionRecord(record.name, record.hash, [])
            program.add_one_mismatch(func.test)
        else:
            cutoff = 0 if function and function in record.name else cutoff_default
            _overlap_record(by_hash[record.hash], record, program, func, cutoff)
        if func.valid:
            shown.append(func)
    return OverlapResult(program, shown)
