"""``show`` output against the text ``llvm-profdata show`` saved beside every fixture (spec §7.1)."""

from __future__ import annotations

import contextlib
import io
import shutil
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from profkit.cli.main import main
from profkit.formats.instrprof import FunctionRecord, Profile, ProfileKind, ValueKind
from profkit.present.instrprof.json_show import show_json
from profkit.present.instrprof.llvm_show import ShowOptions, cutoff_percent, show_text
from tests.formats.instrprof.fixtures import entries, ids, path_of, show_args

# LLVM 14 and 16 print only the last profile's binary ID of a multi-profile raw file
# (spec §7.3, fixed in LLVM 18); profkit prints all of them.
KNOWN_LLVM_BUGS = {
    "clang14/dso_concat.profraw.binary-ids.txt",
    "clang16/dso_concat.profraw.binary-ids.txt",
}

SHOWS = [e for e in entries("show") if e["path"] not in KNOWN_LLVM_BUGS]


def _run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(argv)
    return rc, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("entry", SHOWS, ids=ids(SHOWS))
def test_matches_saved_llvm_output(entry: dict) -> None:
    rc, out, err = _run(
        ["profdata", "show", "--llvm-version", str(entry["llvm"]), *show_args(entry)]
    )
    assert rc == 0, err
    assert out == path_of(entry).read_text()


ORACLE = [
    e for e in SHOWS if e["llvm"] in (19, 22) and e.get("show") in ("show-all-counts", "ic-targets")
]


def _live(version: int, args: list[str]) -> str:
    tool = shutil.which(f"llvm-profdata-{version}")
    if tool is None:
        pytest.skip(f"llvm-profdata-{version} not on PATH")
    return subprocess.run([tool, "show", *args], capture_output=True, text=True, check=True).stdout


@pytest.mark.oracle
@pytest.mark.parametrize("entry", ORACLE, ids=ids(ORACLE))
def test_matches_live_llvm_profdata(entry: dict) -> None:
    args = show_args(entry)
    live = _live(entry["llvm"], args)
    assert _run(["profdata", "show", "--llvm-version", str(entry["llvm"]), *args])[1] == live


# Option combinations the saved outputs do not cover, checked against the live tool.
COMBOS = [
    ["--text", "--all-functions"],
    ["--all-functions", "--ic-targets", "--memop-sizes", "--show-vtables", "--counts"],
    ["--value-cutoff=5", "--all-functions"],
    ["--list-below-cutoff", "--value-cutoff=5"],
    ["--function=main", "--counts", "--topn=2"],
    ["--showcs", "--all-functions", "--counts", "--detailed-summary"],
    ["--detailed-summary-cutoffs=800000,901000,999999", "--detailed-summary"],
    ["--temporal-profile-traces", "--binary-ids", "--profile-version"],
]
COMBO_FILES = [
    e
    for e in entries("profraw", (22,)) + entries("profdata", (22,))
    if e.get("variant") in ("ir", "fe", "vtable", "ir_plus_cs", "ir_temporal", "dso_concat")
]


@pytest.mark.oracle
@pytest.mark.parametrize("options", COMBOS, ids=[" ".join(c) for c in COMBOS])
def test_option_combinations_match_live_tool(options: list[str]) -> None:
    if not COMBO_FILES:
        pytest.skip("fixtures not present")
    for entry in COMBO_FILES:
        args = [*options, str(path_of(entry))]
        assert _run(["profdata", "show", *args])[1] == _live(22, args), entry["path"]


def _profile(kind: ProfileKind = ProfileKind.IR) -> Profile:
    return Profile(
        kind=kind,
        records=[
            FunctionRecord("a", 1, [5, 7]),
            FunctionRecord("b", 2, [7]),
            FunctionRecord("c", 3, [7, 1]),
            FunctionRecord("d", 4, [2]),
        ],
        format="indexed",
        version=13,
    )


def test_topn_ties_keep_reader_order() -> None:
    text = show_text(_profile(), ShowOptions(topn=2))
    assert text.endswith("  a, max count = 7\n  b, max count = 7\n")


def test_cs_records_need_showcs() -> None:
    prof = _profile()
    prof.records.append(FunctionRecord("cs", (1 << 60) | 9, [100]))
    assert "Total functions: 4\n" in show_text(prof, ShowOptions())
    out = show_text(prof, ShowOptions(showcs=True, all_functions=True))
    assert "  cs:\n" in out and "Total functions: 1\n" in out


def test_front_end_hides_first_counter_in_block_counts() -> None:
    out = show_text(_profile(ProfileKind.NONE), ShowOptions(all_functions=True, counts=True))
    assert "    Function count: 5\n    Block counts: [7]\n" in out
    assert "\nInstrumentation level: Front-end\n" in out


def test_cutoff_percent_uses_float_rounding() -> None:
    assert [cutoff_percent(c) for c in (10000, 999000, 999999)] == ["1", "99.9", "99.9999"]


def test_json_schema() -> None:
    import json

    prof = _profile()
    prof.records[0].value_sites = {ValueKind.INDIRECT_CALL_TARGET: [[(0, 3)]]}
    doc = json.loads(show_json(prof, ShowOptions(all_functions=True)))
    assert doc["instrumentation"] == "IR"
    assert doc["summary"]["total_functions"] == 4
    assert doc["functions"][0]["value_sites"]["indirect_call_target"][0][0]["count"] == 3
    assert [f["name"] for f in doc["functions"]] == ["a", "b", "c", "d"]


_records = st.lists(
    st.builds(
        FunctionRecord,
        name=st.text("abc._", min_size=1, max_size=4),
        hash=st.sampled_from([1, 2, (1 << 60) | 3]),
        counts=st.lists(
            st.integers(0, 50) | st.sampled_from([(1 << 64) - 1, (1 << 64) - 2]),
            min_size=1,
            max_size=4,
        ),
    ),
    max_size=8,
)


@settings(max_examples=80, deadline=None)
@given(_records, st.booleans(), st.integers(0, 3), st.sampled_from([14, 19, 22]))
def test_any_profile_any_options(records: list, ir: bool, topn: int, llvm: int) -> None:
    prof = Profile(kind=ProfileKind.IR if ir else ProfileKind.NONE, records=records, format="raw")
    for opts in (
        ShowOptions(all_functions=True, counts=True, topn=topn, llvm_version=llvm),
        ShowOptions(detailed_summary=True, value_cutoff=5, list_below_cutoff=True),
        ShowOptions(text=True, all_functions=True, showcs=True),
        ShowOptions(covered=True, ic_targets=True, memop_sizes=True, show_vtables=True),
    ):
        text = show_text(prof, opts)
        assert text.endswith("\n") or text == ""
    shown = show_text(prof, ShowOptions())
    regular = [r for r in records if not (ir and r.is_cs) and r.counts[0] < (1 << 64) - 2]
    assert f"Total functions: {len(regular)}\n" in shown
