"""The merge entry point (:func:`profkit.formats.instrprof.merge_inputs`, issue #21 item 5):
request → result, with no command line in between, and what it reports, in order."""

from __future__ import annotations

from pathlib import Path

import pytest

from profkit.errors import ProfkitError, UsageError
from profkit.formats.instrprof import MergeInput, MergeRequest, merge_inputs, parse_profile
from tests.formats.instrprof.fixtures import ROOT

C16 = ROOT / "clang16"
C22 = ROOT / "clang22"

pytestmark = pytest.mark.skipif(not C16.exists(), reason="instrprof fixtures are absent")


def _request(*paths: Path, **options: object) -> MergeRequest:
    return MergeRequest(inputs=[MergeInput(str(p)) for p in paths], output="-", **options)  # type: ignore[arg-type]


def test_imitating_llvm_16_gives_its_bytes() -> None:
    result = merge_inputs(_request(C16 / "fe.profraw", llvm_version=16))
    assert result.data == (C16 / "fe.profdata").read_bytes()
    assert result.chosen is None  # the request named the release


def test_the_default_version_is_chosen_from_the_inputs() -> None:
    result = merge_inputs(_request(C22 / "fe.profraw"))
    assert result.chosen is not None and result.chosen.version == 12  # clang 19 reads v12
    assert result.data is not None and parse_profile(result.data).version == 12
    llvm = merge_inputs(_request(C22 / "fe.profraw", llvm_default=True))
    assert llvm.chosen is None and parse_profile(llvm.data or b"").version == 13


def test_written_to_a_file(tmp_path: Path) -> None:
    out = tmp_path / "out.profdata"
    result = merge_inputs(
        MergeRequest(inputs=[MergeInput(str(C16 / "fe.profraw"))], output=str(out), llvm_version=16)
    )
    assert result.data is None
    assert out.read_bytes() == (C16 / "fe.profdata").read_bytes()


def test_weights_filtering_and_zero_dropping_are_reported() -> None:
    events: list[object] = []
    request = MergeRequest(
        inputs=[MergeInput(str(C16 / "fe.profraw"), 3)],
        output="-",
        text=True,
        sparse=True,
        no_function="main",
    )
    result = merge_inputs(
        request,
        on_merged=lambda outcome: events.append(("merged", outcome.merged)),
        on_filtered=lambda removed, total: events.append(("filtered", removed, total)),
    )
    names = [r.name for r in result.profile.records]
    assert events[0] == ("merged", 1) and events[1][0] == "filtered"
    assert "main" not in names and events[1][1] >= 1
    assert all(any(r.counts) for r in result.profile.records)  # --sparse with --text
    once = merge_inputs(_request(C16 / "fe.profraw", text=True))
    first = {r.name: r.counts for r in once.profile.records}
    for record in result.profile.records:
        assert record.counts == [3 * c for c in first[record.name]]


def test_failure_modes(tmp_path: Path) -> None:
    bad = tmp_path / "bad.profraw"
    bad.write_bytes(b"\x81rforpl\xff" + bytes(8))
    seen: list[int] = []
    with pytest.raises(ProfkitError, match=r"1 of 2 input\(s\) could not be merged"):
        merge_inputs(
            _request(bad, C16 / "fe.profraw"),
            on_merged=lambda outcome: seen.append(len(outcome.failures)),
        )
    assert seen == [1]  # told before the failure mode is applied
    warned = merge_inputs(_request(bad, C16 / "fe.profraw", failure_mode="warn", llvm_version=16))
    assert warned.outcome.failures and warned.data == (C16 / "fe.profdata").read_bytes()
    merge_inputs(_request(bad, C16 / "fe.profraw", failure_mode="all"))
    with pytest.raises(ProfkitError):
        merge_inputs(_request(bad, failure_mode="all"))


def test_requests_that_cannot_run_are_refused_before_reading(tmp_path: Path) -> None:
    source = tmp_path / "in.profraw"
    source.write_bytes((C16 / "fe.profraw").read_bytes())
    same = MergeRequest(inputs=[MergeInput(str(source))], output=str(source))
    with pytest.raises(UsageError, match="also an input"):
        merge_inputs(same)
    with pytest.raises(UsageError, match="temporal profile limits"):
        merge_inputs(_request(source, max_trace_length=0))
    with pytest.raises(UsageError, match="num-threads"):
        merge_inputs(_request(source, jobs=-1))
    with pytest.raises(UsageError, match="regex"):
        merge_inputs(_request(source, function="("))
    with pytest.raises(UsageError, match="cannot write indexed version 6"):
        merge_inputs(_request(source, indexed_version=6))
