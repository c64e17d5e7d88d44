"""`profkit profdata` never overwrites an input and reports unwritable outputs in one line."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from profkit.cli.main import main

FIXTURE = Path(__file__).parents[1] / "fixtures" / "instrprof" / "clang22" / "ir.profraw"


@pytest.fixture()
def raw(tmp_path: Path) -> Path:
    if not FIXTURE.exists():
        pytest.skip("instrprof fixtures missing")
    target = tmp_path / "a.profraw"
    shutil.copyfile(FIXTURE, target)
    return target


@pytest.mark.parametrize(
    "argv",
    [
        ["merge", "-o", "{raw}", "{raw}"],
        ["merge", "-o", "{raw}", "{dir}"],
        ["merge", "--text", "-o", "{dir}/./a.profraw", "{raw}"],
        ["show", "-o", "{raw}", "{raw}"],
        ["overlap", "-o", "{raw}", "{raw}", "{raw}"],
    ],
)
def test_output_that_is_an_input_is_refused(
    raw: Path, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    before = raw.read_bytes()
    args = [a.format(raw=raw, dir=raw.parent) for a in argv]
    assert main(["profdata", *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is also an input" in err
    assert raw.read_bytes() == before


@pytest.mark.parametrize("command", ["merge", "show"])
def test_unwritable_output_is_one_line(
    raw: Path, tmp_path: Path, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "missing-dir" / "x"
    assert main(["profdata", command, "-o", str(out), str(raw)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("profkit: error: cannot write ") and err.count("\n") == 1
