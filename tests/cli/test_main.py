"""The command line's own contract: help, version, error policy, ``python -m profkit``."""

from __future__ import annotations

import subprocess
import sys

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
