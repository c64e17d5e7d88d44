"""`profkit export` end to end through ``main``."""

from __future__ import annotations

import json
import os
import pstats
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from profkit.calltree import file
from profkit.cli.main import main
from profkit.export import registry
from tests.calltree.strategies import sample_profile


@pytest.fixture
def saved(tmp_path: Path) -> Path:
    path = tmp_path / "run.json.gz"
    file.save(sample_profile(), path)
    return path


@pytest.mark.parametrize("name", registry.names())
def test_default_output_name(saved: Path, name: str) -> None:
    assert main(["export", str(saved), "--format", name]) == 0
    out = saved.parent / ("run" + registry.get(name).extension)
    assert out.stat().st_size > 0


def test_explicit_output_and_loadable(saved: Path, tmp_path: Path) -> None:
    out = tmp_path / "x.prof"
    assert main(["export", str(saved), "-F", "pstats", "-o", str(out)]) == 0
    assert pstats.Stats(str(out)).total_calls == 7  # type: ignore[attr-defined]


def test_stdout(saved: Path, capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    assert main(["export", str(saved), "-F", "speedscope", "-o", "-"]) == 0
    doc = json.loads(capsysbinary.readouterr().out)
    assert doc["$schema"].startswith("https://www.speedscope.app/")


def test_binary_refused_on_terminal(
    saved: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.stdout.isatty", lambda: True)
    assert main(["export", str(saved), "-F", "pprof", "-o", "-"]) == 2
    assert "binary" in capsys.readouterr().err


def test_errors(saved: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", str(saved), "-F", "svg"]) == 2
    assert "invalid choice" in capsys.readouterr().err
    assert main(["export", str(saved), "-F", "html", "-o", str(tmp_path / "no" / "x.html")]) == 2
    assert "cannot write" in capsys.readouterr().err
    assert main(["export", str(saved), "-F", "html", "-o", str(saved)]) == 2
    assert "also an input" in capsys.readouterr().err


def test_help_lists_every_format(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", "--help"]) == 0
    out = capsys.readouterr().out
    for f in registry.EXPORTS:
        assert f.name in out and f.extension in out


def test_other_spelling_of_the_input_is_refused(
    saved: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``-o ./run.json.gz`` once replaced the input ``run.json.gz`` (string comparison)."""
    before = saved.read_bytes()
    monkeypatch.chdir(saved.parent)
    assert main(["export", saved.name, "-F", "collapsed", "-o", f"./{saved.name}"]) == 2
    assert "also an input" in capsys.readouterr().err
    assert saved.read_bytes() == before
    assert main(["export", saved.name, "-F", "collapsed", "-o", ""]) == 2
    assert "-o needs a file name" in capsys.readouterr().err


def _hostile_names_profile(tmp_path: Path) -> Path:
    """Valid JSON a profile may hold: a lone surrogate (what a non-UTF-8 file name decodes
    to) and terminal control characters in frame and thread names."""
    doc = file.to_json(sample_profile())
    doc["frames"][0][0] = "main\ud800\x1b[31mRED\nnext"
    doc["frames"][1][1] = "/src/caf\udce9.py"
    doc["threads"][0]["name"] = "T\x1b]0;title\x07"
    path = tmp_path / "hostile.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("name", registry.names())
def test_names_that_are_not_utf8_or_printable_export(tmp_path: Path, name: str) -> None:
    """These were internal errors (UnicodeEncodeError) in html, collapsed and pprof."""
    src = _hostile_names_profile(tmp_path)
    out = tmp_path / f"out.{name}"
    assert main(["export", str(src), "-F", name, "-o", str(out)]) == 0
    if not registry.get(name).binary:
        out.read_bytes().decode("utf-8")  # still valid UTF-8


@pytest.mark.parametrize("view", ["tree", "flat", "callers"])
def test_report_escapes_control_characters(
    tmp_path: Path, view: str, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    src = _hostile_names_profile(tmp_path)
    assert main(["report", str(src), "--view", view, "-f", "RED", "--width", "200"]) == 0
    out = capsysbinary.readouterr().out.decode("utf-8")
    assert "\x1b" not in out and "\x07" not in out
    assert "main\\ud800\\x1b[31mRED\\nnext" in out


def test_stdout_write_error_is_one_line(saved: Path) -> None:
    """A full disk behind ``>`` was an internal error (exit 70) for report and export."""
    if not os.path.exists("/dev/full") or not stat.S_ISCHR(os.stat("/dev/full").st_mode):
        pytest.skip("no /dev/full")
    for argv in (["report", str(saved)], ["export", str(saved), "-F", "collapsed", "-o", "-"]):
        with open("/dev/full", "wb") as full:
            proc = subprocess.run(
                [sys.executable, "-m", "profkit", *argv],
                stdout=full,
                stderr=subprocess.PIPE,
                text=True,
                timeout=60,
            )
        assert proc.returncode == 2
        assert proc.stderr == "profkit: error: cannot write to stdout: No space left on device\n"
