"""`profkit export` end to end through ``main``."""

from __future__ import annotations

import json
import pstats
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


def test_binary_refused_on_terminal(saved: Path, monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str]) -> None:
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
    for f in registry.FORMATS:
        assert f.name in out and f.extension in out
