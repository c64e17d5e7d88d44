"""``profkit report/export FILE.nettrace`` on the runtime's own start-up traces (committed
fixtures of tests/fixtures/nettrace, made by its make_fixtures.py), and on damaged ones:
one ``profkit: error:`` line naming the file, exit 2, never a traceback."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from profkit.cli.main import main
from profkit.dotnet.nettracefile import is_nettrace, profile_of_file

FIXTURES = Path(__file__).parents[1] / "fixtures" / "nettrace"
RUNTIME_TRACE = FIXTURES / "spinner_runtime.nettrace"


def test_startup_trace_opens_as_a_profile() -> None:
    profile = profile_of_file(str(RUNTIME_TRACE))
    names = {f.name for f in profile.frames}
    assert {"NettraceFixture.Burner.Inner", "NettraceFixture.Program.Main"} <= names
    assert profile.mode == "sample" and profile.threads[0].name == "Main Thread"
    assert profile.metadata["sampler"]["rundown_complete"]


def test_report_and_export(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(RUNTIME_TRACE)]) == 0
    assert "NettraceFixture.Burner.Inner" in capsys.readouterr().out
    out = tmp_path / "s.speedscope.json"
    assert main(["export", "-F", "speedscope", str(RUNTIME_TRACE), "-o", str(out)]) == 0
    assert "NettraceFixture.Burner.Outer" in out.read_text()


def test_sniffed_by_magic(tmp_path: Path) -> None:
    renamed = tmp_path / "trace.bin"
    renamed.write_bytes(RUNTIME_TRACE.read_bytes())
    assert is_nettrace(str(renamed))
    assert not is_nettrace(str(tmp_path / "absent.json"))


def _run(capsys: pytest.CaptureFixture[str], path: Path) -> tuple[int, str]:
    try:
        status = main(["report", str(path)])
    except SystemExit as exc:  # the CLI's error funnel may exit
        status = int(exc.code or 0)
    return status, capsys.readouterr().err


def test_damaged_traces_are_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = RUNTIME_TRACE.read_bytes()
    rng = random.Random(23)
    cases = [data[:n] for n in (0, 7, 20, 100, len(data) // 2, len(data) - 1)]
    for _ in range(12):
        mutated = bytearray(data)
        for _ in range(rng.randint(1, 8)):
            mutated[rng.randrange(len(mutated))] = rng.randrange(256)
        cases.append(bytes(mutated))
    for i, case in enumerate(cases):
        path = tmp_path / f"d{i}.nettrace"
        path.write_bytes(case)
        status, err = _run(capsys, path)
        assert "Traceback" not in err
        if i < 6:
            assert status == 2  # every truncation is an error
        if status != 0:  # a flipped byte in a payload can leave the trace readable
            assert status == 2
            lines = err.strip().splitlines()
            assert (
                len(lines) == 1
                and lines[0].startswith("profkit: error: ")
                and str(path) in lines[0]
            )


def test_samples_without_names_still_open(capsys: pytest.CaptureFixture[str]) -> None:
    # the sample profiler alone, no method events: the frames cannot be named
    status, err = _run(capsys, FIXTURES / "spinner_samples.nettrace")
    assert status == 0, err
    profile = profile_of_file(str(FIXTURES / "spinner_samples.nettrace"))
    assert profile.metadata["sampler"]["unnamed_addresses"] > 0
