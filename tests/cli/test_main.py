"""The command line's own contract: help, version, error policy, ``python -m profkit``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from profkit.cli.main import COMMANDS, main


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("profkit ")


def test_no_arguments_prints_help_and_fails(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "COMMAND" in capsys.readouterr().err


@pytest.mark.parametrize("command", [c[0] for c in COMMANDS])
def test_every_command_has_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([command, "--help"]) == 0
    assert capsys.readouterr().out


def test_unknown_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["no-such-command"]) == 2
    assert "invalid choice" in capsys.readouterr().err


def test_python_dash_m() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "profkit", "--version"], capture_output=True, text=True, check=True
    )
    assert out.stdout.startswith("profkit ")


_SWALLOWED_INTERRUPT = """
import os, signal, sys
from profkit._atomic import AtomicOutput
from profkit.cli import main as cli_main

def handler(args):
    try:  # where Python loses it (a __del__, a weakref callback): only "ignored"
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(1000):
            pass
    except KeyboardInterrupt:
        pass
    with AtomicOutput(sys.argv[1]) as fh:
        fh.write(b"complete")
    return 0

class Args:
    command = "demo"

sys.exit(cli_main.run_handler(handler, Args()))
"""


def test_an_interrupt_python_swallowed_still_publishes_nothing(tmp_path: Path) -> None:
    prog = tmp_path / "p.py"
    prog.write_text(_SWALLOWED_INTERRUPT)
    out = tmp_path / "out" / "merged.bin"
    out.parent.mkdir()
    proc = subprocess.run(
        [sys.executable, str(prog), str(out)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 130, proc.stderr
    assert proc.stderr == "profkit: interrupted\n"
    assert os.listdir(out.parent) == []
