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


def test_top_level_help_names_every_subcommand_it_lists() -> None:
    """N13: `profkit --help` said "perfmap  perf maps: show, lookup, convert, symbolize,
    verify" and left out from-image. A command whose one-line help lists its subcommands
    lists them all."""
    import argparse

    from profkit.cli.main import COMMANDS, build_parser

    parser = build_parser()
    (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    for name, _, help_text in COMMANDS:
        listed = help_text.split(": ", 1)[1].split(", ") if ": " in help_text else None
        inner = [
            a for a in commands.choices[name]._actions if isinstance(a, argparse._SubParsersAction)
        ]
        if listed is None or not inner or any(" " in word for word in listed):
            continue  # (prose, not a list of subcommands)
        assert sorted(listed) == sorted(inner[0].choices), name


def test_sampling_end_is_not_worded_as_the_process_stopped() -> None:
    """N13: `attach`/`top` ended with "pid N stopped", read as profkit having sent SIGSTOP."""
    from profkit.cli.attach import ending

    assert ending(7, "stopped") == "sampling stopped; pid 7 runs on"
    assert ending(7, "exited") == "pid 7 exited"
    assert ending(7, "") == "pid 7 still running"
