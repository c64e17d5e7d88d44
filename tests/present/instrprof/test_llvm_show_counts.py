"""``show --counts`` entries: the cached %-templates against a plain, per-field rendering.

``show_text`` formats the common ``--all-functions --counts`` entry with one cached
%-template per counter count (speed); this checks it against the obvious f-string for
IR and front-end profiles, any u64 counts, empty counter lists, PseudoHot/Warm records
and names that contain format characters.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from profkit.formats.instrprof.model import FunctionRecord, Profile, ProfileKind
from profkit.present.instrprof import llvm_show as show
from profkit.present.instrprof.llvm_show import ShowOptions, show_text

M64 = (1 << 64) - 1
_PSEUDO = {M64: "PseudoHot", M64 - 1: "PseudoWarm"}


def reference_entry(rec: FunctionRecord, ir: bool) -> str:
    counts = rec.counts
    head = f"  {rec.name}:\n    Hash: 0x{rec.hash:016x}\n    Counters: {len(counts)}"
    pseudo = _PSEUDO.get(counts[0]) if counts else None
    if pseudo is not None:
        return f"{head}    <{pseudo}>"
    if not ir:
        head += f"\n    Function count: {counts[0]}"
    blocks = ", ".join(map(str, counts if ir else counts[1:]))
    return f"{head}\n    Block counts: [{blocks}]"


_counts = st.lists(
    st.integers(0, M64) | st.integers(0, 9) | st.sampled_from([M64, M64 - 1, 1 << 63]),
    max_size=12,
)
_records = st.lists(
    st.builds(
        FunctionRecord,
        name=st.text("ab%d{}.:_ \u00e9", min_size=1, max_size=6),
        hash=st.integers(0, M64),
        counts=_counts,
    ),
    max_size=10,
)


@settings(max_examples=120, deadline=None)
@given(_records, st.booleans())
def test_counts_entries_match_plain_formatting(records: list[FunctionRecord], ir: bool) -> None:
    if not ir:  # front-end records always have the entry counter
        records = [r for r in records if r.counts]
    kind = ProfileKind.IR if ir else ProfileKind.NONE
    prof = Profile(kind=kind, records=records, format="indexed", version=13)
    text = show_text(prof, ShowOptions(all_functions=True, counts=True))
    shown = [r for r in records if not (ir and r.is_cs)]
    expected = "".join(f"{reference_entry(r, ir)}\n" for r in shown)
    if shown:
        assert text.startswith("Counters:\n" + expected + "Instrumentation level: ")
    else:
        assert text.startswith("Instrumentation level: ")


def test_many_distinct_counter_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    """More distinct sizes than the template cache holds still format correctly."""
    monkeypatch.setattr(show, "TEMPLATE_CACHE_LIMIT", 3)
    monkeypatch.setattr(show, "_COUNTS_TEMPLATES", {False: {}, True: {}})
    records = [FunctionRecord(f"f{n}", n, list(range(n))) for n in range(1, 40)]
    prof = Profile(kind=ProfileKind.IR, records=records, format="indexed", version=13)
    text = show_text(prof, ShowOptions(all_functions=True, counts=True))
    expected = "".join(f"{reference_entry(r, True)}\n" for r in records)
    assert text.startswith("Counters:\n" + expected)


@settings(max_examples=120, deadline=None)
@given(_records, st.booleans(), st.booleans(), st.sampled_from([14, 19, 22]))
def test_fast_path_equals_general_loop(
    records: list[FunctionRecord], ir: bool, showcs: bool, llvm: int
) -> None:
    """Unfiltered ``--all-functions --counts`` takes ``_all_counts``; same text as the loop."""
    if not ir:
        records = [r for r in records if r.counts]
    kind = ProfileKind.IR if ir else ProfileKind.NONE
    prof = Profile(kind=kind, records=records, format="indexed", version=13)
    for opts in (
        ShowOptions(all_functions=True, counts=True, showcs=showcs, llvm_version=llvm),
        ShowOptions(all_functions=True, counts=True, detailed_summary=True, llvm_version=llvm),
    ):
        fast = show_text(prof, opts)
        try:
            show.ALL_COUNTS_FAST_PATH = False
            general = show_text(prof, opts)
        finally:
            show.ALL_COUNTS_FAST_PATH = True
        assert fast == general
