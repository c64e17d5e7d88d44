"""Progress on stderr for `report` and `export`, and collapsed's size note (#25 item 15).

No test waits for the real two seconds: the line's clock is injected, and the commands
are run with ``--progress`` (drawn from the first step) or on a pipe (never drawn).
"""

from __future__ import annotations

import io
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from profkit.calltree import file
from profkit.cli import export as export_cli
from profkit.cli.main import main
from profkit.cli.progress import DELAY, ProgressLine, progress_line
from tests.calltree.strategies import sample_profile


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def saved(tmp_path: Path) -> Path:
    path = tmp_path / "run.json"
    file.save(sample_profile(), path)
    return path


def test_the_line_waits_then_redraws_in_place_then_is_erased() -> None:
    out, clock = io.StringIO(), _Clock()
    line = ProgressLine(out, clock=clock)
    line("parsing")
    clock.now += DELAY / 2
    line("building the call tree", 10, 100)
    assert out.getvalue() == ""  # a short command shows nothing
    clock.now += DELAY
    line("building the call tree", 50, 100)
    assert out.getvalue() == f"\rprofkit: building the call tree  50% ({1.5 * DELAY:.0f} s)\x1b[K"
    line("building the call tree", 60, 100)  # too soon after the last redraw
    assert out.getvalue().count("\r") == 1
    line("writing", 0, 0)  # a new step is drawn at once, without a share
    assert out.getvalue().endswith("\rprofkit: writing (3 s)\x1b[K")
    line.close()
    assert out.getvalue().endswith("\r\x1b[K")
    line.close()
    assert out.getvalue().count("\r\x1b[K") == 1


def test_a_line_never_drawn_is_not_erased() -> None:
    out = io.StringIO()
    line = ProgressLine(out, clock=_Clock())
    line("reading")
    line.close()
    assert out.getvalue() == ""


def test_only_a_terminal_gets_it_unless_forced() -> None:
    assert progress_line(None, io.StringIO()) is None
    assert progress_line(False, _Tty()) is None
    auto = progress_line(None, _Tty())
    assert auto is not None and auto.delay == DELAY
    forced = progress_line(True, io.StringIO())
    assert forced is not None and forced.delay == 0


@pytest.mark.parametrize(
    "argv",
    [
        ["report", "{}", "--progress"],
        ["export", "{}", "-F", "collapsed", "--progress", "-o", "{}.txt"],
        ["export", "{}", "-F", "speedscope", "--progress", "-o", "{}.ss.json"],
    ],
)
def test_forced_progress_is_drawn_and_erased(
    saved: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    assert main([a.format(saved) for a in argv]) == 0
    err = capsys.readouterr().err
    assert "\rprofkit: reading (0 s)\x1b[K" in err
    assert "\rprofkit: parsing" in err
    drawn = err.rindex("\x1b[K\r\x1b[K")  # the last drawing, then erased
    assert "\r" not in err[drawn + 5 :]


def test_no_progress_on_a_pipe(saved: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(saved)]) == 0
    assert main(["export", str(saved), "-F", "collapsed", "-o", str(saved) + ".txt"]) == 0
    assert "\r" not in capsys.readouterr().err


def test_collapsed_size_is_said_before_writing(
    saved: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(export_cli, "NOTE_BYTES", 0)
    out = tmp_path / "out.txt"
    assert main(["export", str(saved), "-F", "collapsed", "-o", str(out)]) == 0
    err = capsys.readouterr().err
    size = out.stat().st_size
    assert f"collapsed output will be {size:,} bytes in 6 lines" in err
    assert "--min-share 0.01 folds the stacks" in err
    assert err.index("will be") < err.index("wrote")
    assert main(["export", str(saved), "-F", "collapsed", "-o", str(out), "--min-share", "40"]) == 0
    err = capsys.readouterr().err
    assert "in 3 lines" in err and "--min-share 0.01" not in err
    assert sum(int(x.rsplit(b" ", 1)[1]) for x in out.read_bytes().splitlines()) == 12_000_000


def test_min_share_is_for_collapsed(saved: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", str(saved), "-F", "html", "--min-share", "1"]) == 2
    assert "--min-share applies to -F collapsed" in capsys.readouterr().err
    assert main(["export", str(saved), "-F", "collapsed", "--min-share", "101"]) == 2
    assert "between 0 and 100" in capsys.readouterr().err


def test_on_a_terminal(saved: Path) -> None:
    """Through a real pty: the line is drawn on the terminal and erased before the
    report's own text (forced, so the test need not run two seconds)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "profkit", "report", str(saved), "--progress", "--color"],
        stdin=subprocess.DEVNULL,
        stdout=slave,
        stderr=slave,
    )
    os.close(slave)
    text = b""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if select.select([master], [], [], 1.0)[0]:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the command ended: its pty closed
                break
            if not chunk:
                break
            text += chunk
    proc.wait(timeout=60)
    os.close(master)
    assert proc.returncode == 0
    assert b"\rprofkit: reading" in text
    erased = text.rindex(b"\r\x1b[K")
    assert b"myapp.main" in text[erased:]
