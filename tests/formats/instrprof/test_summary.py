"""compute_summary against a literal transcription of LLVM's ProfileSummaryBuilder (spec §5.2)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from profkit.formats.instrprof.model import CS_FLAG_IN_FUNC_HASH, FunctionRecord, SummaryEntry
from profkit.formats.instrprof.summary import DEFAULT_CUTOFFS, compute_summary

M64 = (1 << 64) - 1


def reference(records: list[FunctionRecord], cs: bool) -> tuple[list[int], list[SummaryEntry]]:
    """Counter by counter, exactly as the C++ does it."""
    total = maxc = maxf = maxi = ncounts = nfuncs = 0
    freq: dict[int, int] = {}
    for r in records:
        if r.is_cs != cs or r.counts[0] in (M64, M64 - 1):
            continue
        for i, c in enumerate(r.counts):
            total = (total + c) & M64
            maxc = max(maxc, c)
            ncounts += 1
            freq[c] = freq.get(c, 0) + 1
            if i == 0:
                nfuncs += 1
                maxf = max(maxf, c)
            else:
                maxi = max(maxi, c)
    items = sorted(freq.items(), reverse=True)
    entries = []
    it = 0
    seen = cur = count = 0
    for cutoff in DEFAULT_CUTOFFS:
        desired = total * cutoff // 1_000_000
        while cur < desired and it < len(items):
            count, f = items[it]
            cur += count * f
            seen += f
            it += 1
        entries.append(SummaryEntry(cutoff, count, seen))
    return [nfuncs, ncounts, maxf, maxc, maxi, total], entries


records_st = st.lists(
    st.builds(
        FunctionRecord,
        name=st.sampled_from(["a", "b", "c"]),
        hash=st.integers(0, 7) | st.just(CS_FLAG_IN_FUNC_HASH | 3),
        counts=st.lists(
            st.integers(0, 1000) | st.sampled_from([0, 1, 2**40]), min_size=1, max_size=6
        ),
    ),
    max_size=12,
)


@settings(max_examples=150, deadline=None)
@given(records_st)
def test_matches_reference(records: list[FunctionRecord]) -> None:
    regular, cs = compute_summary(records)
    for summary, is_cs in ((regular, False), (cs, True)):
        fields, entries = reference(records, is_cs)
        assert [
            summary.total_num_functions,
            summary.total_num_blocks,
            summary.max_function_count,
            summary.max_block_count,
            summary.max_internal_block_count,
            summary.total_block_count,
        ] == fields
        assert summary.entries == entries


def test_pseudo_counts_are_skipped() -> None:
    regular, _ = compute_summary([FunctionRecord("p", 1, [M64, 5]), FunctionRecord("q", 2, [3])])
    assert regular.total_num_functions == 1
    assert regular.total_block_count == 3


def test_empty() -> None:
    regular, cs = compute_summary([])
    assert regular.total_num_functions == 0
    assert [e.num_counts for e in cs.entries] == [0] * len(DEFAULT_CUTOFFS)
