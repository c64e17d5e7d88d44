"""Which runtime a PID is, and what is said when it cannot be sampled (no runtime needed)."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from profkit.dotnet import ipc, process
from profkit.dotnet.ipc import DiagnosticsError


def test_this_python_is_python() -> None:
    assert process.kind_of(os.getpid()) == "python"


def _exec_done(proc: subprocess.Popen[bytes], name: str) -> None:
    """Until the child is ``name`` (right after fork it is still a copy of this Python)."""
    while not os.readlink(f"/proc/{proc.pid}/exe").endswith(name):
        time.sleep(0.01)


def test_a_shell_is_unknown_and_named() -> None:
    proc = subprocess.Popen(["sleep", "30"])
    try:
        _exec_done(proc, "/sleep")
        assert process.kind_of(proc.pid) == "unknown"
        message = process.neither_message(proc.pid)
        assert "not a Python process, nor a .NET one" in message and "sleep" in message
    finally:
        proc.kill()
        proc.wait()


def test_dead_and_zombie_processes() -> None:
    proc = subprocess.Popen(["true"])
    while True:  # exited but not reaped: a zombie
        with open(f"/proc/{proc.pid}/stat") as fh:
            if fh.read().rpartition(")")[2].split()[0] == "Z":
                break
    with pytest.raises(process.NoSuchProcess, match="exited"):
        process.kind_of(proc.pid)
    proc.wait()
    with pytest.raises(process.NoSuchProcess, match="no such process"):
        process.kind_of(proc.pid)


def test_port_turned_off_is_said(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(process, "find_socket", lambda pid: None)
    monkeypatch.setattr(process, "read_environ", lambda pid: {"DOTNET_EnableDiagnostics": "0"})
    with pytest.raises(DiagnosticsError, match="DOTNET_EnableDiagnostics=0"):
        process.diagnostics_socket(1234)
    monkeypatch.setattr(process, "read_environ", lambda pid: {})
    monkeypatch.setattr(process, "target_tmpdir", lambda pid: str(tmp_path))
    with pytest.raises(DiagnosticsError, match="without a diagnostics socket") as err:
        process.diagnostics_socket(1234)
    assert "not readable" in str(err.value)


def test_environ_and_tmpdir_of_another_process(tmp_path: Path) -> None:
    proc = subprocess.Popen(["sleep", "30"], env={"TMPDIR": str(tmp_path), "A": "b=c"})
    try:
        # until the child has exec'd, /proc/PID/environ is the forked parent's (a loaded
        # machine showed {} here): wait for the exec itself, not for a time
        deadline = time.monotonic() + 60
        while Path(f"/proc/{proc.pid}/cmdline").read_bytes().split(b"\0")[0] != b"sleep":
            assert time.monotonic() < deadline, "the child never exec'd sleep"
            time.sleep(0.01)
        assert ipc.read_environ(proc.pid) == {"TMPDIR": str(tmp_path), "A": "b=c"}
        assert ipc.target_tmpdir(proc.pid) == str(tmp_path)
        # the key is the process's start time; a socket with another key is a dead one's
        (tmp_path / f"dotnet-diagnostic-{proc.pid}-7-socket").touch()
        assert ipc.find_socket(proc.pid) is None
        key = ipc._start_ticks(proc.pid)
        (tmp_path / f"dotnet-diagnostic-{proc.pid}-{key}-socket").touch()
        found = ipc.find_socket(proc.pid)  # seen through /proc/PID/root where allowed
        assert found is not None
        assert found.endswith(f"{tmp_path}/dotnet-diagnostic-{proc.pid}-{key}-socket")
    finally:
        proc.kill()
        proc.wait()
