"""What kind of process a PID is (.NET, Python, neither), and where its diagnostics port is.

``attach``, ``top`` and ``dump`` take a PID of either runtime: a .NET process is one that
maps ``libcoreclr.so`` or has a diagnostics socket; a Python process is the sampler's to
recognise (it knows static builds and embedded interpreters), so anything else is
``unknown`` here and the caller asks the Python sampler, naming both runtimes if it refuses.
"""

from __future__ import annotations

import os

from profkit.dotnet.ipc import DiagnosticsError, find_socket, read_environ, target_tmpdir
from profkit.errors import ProfkitError

#: the environment variables that turn the diagnostics port off (3.x and 5+ spellings)
_SWITCHES = ("COMPlus_EnableDiagnostics", "DOTNET_EnableDiagnostics")


class NoSuchProcess(ProfkitError):
    """The PID names no running process."""


def _maps(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/maps") as fh:
            return fh.read()
    except FileNotFoundError:
        raise NoSuchProcess(f"pid {pid}: no such process") from None
    except ProcessLookupError:
        raise NoSuchProcess(f"pid {pid}: no such process") from None
    except OSError:
        return ""


def check_alive(pid: int) -> None:
    """:class:`NoSuchProcess` unless ``pid`` is a live process (not a zombie).

    A zombie ``/proc/PID/stat`` is not always a process that has exited: when the main
    thread alone ends (``pthread_exit``) the thread-group leader shows ``Z`` while the
    other threads run on. Said as "has exited", that misled (issue #22); each case now
    gets its own words."""
    state, parent = _state(f"/proc/{pid}/stat")
    if state is None:
        raise NoSuchProcess(f"pid {pid}: no such process")
    if state not in ("Z", "X"):
        return
    running = _running_threads(pid)
    if running:
        raise NoSuchProcess(
            f"pid {pid}: its main thread has exited while {running} other thread(s) still "
            "run; profkit reads a process through its main thread and cannot read this one"
        )
    raise NoSuchProcess(
        f"pid {pid}: the process has exited; it is a zombie until its parent "
        f"(pid {parent}) waits for it"
    )


def _state(path: str) -> tuple[str | None, str]:
    """A ``stat`` file's state letter and parent pid (``None`` when it cannot be read)."""
    try:
        with open(path) as fh:
            fields = fh.read().rpartition(")")[2].split()
    except OSError:
        return None, "?"
    return (fields[0], fields[1]) if len(fields) > 1 else (None, "?")


def _running_threads(pid: int) -> int:
    """Threads of ``pid`` that are neither zombies nor dead."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0
    states = (_state(f"/proc/{pid}/task/{tid}/stat")[0] for tid in tids)
    return sum(1 for state in states if state is not None and state not in ("Z", "X"))


def kind_of(pid: int) -> str:
    """``dotnet``, ``python`` (a mapping named like it) or ``unknown``; raises
    :class:`NoSuchProcess` for a PID that is not alive."""
    check_alive(pid)
    maps = _maps(pid)
    names = {line.rsplit(" ", 1)[-1].rsplit("/", 1)[-1] for line in maps.splitlines()}
    if "libcoreclr.so" in names or find_socket(pid) is not None:
        return "dotnet"
    if any("python" in n for n in names):
        return "python"
    return "unknown"


def exe_of(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return "(unreadable executable)"


def neither_message(pid: int) -> str:
    """What to say of a PID that is neither runtime's."""
    return (
        f"pid {pid}: not a Python process, nor a .NET one ({exe_of(pid)}: no libpython or "
        "_PyRuntime, no libcoreclr.so, no .NET diagnostics socket)"
    )


def diagnostics_socket(pid: int) -> str:
    """The socket of a .NET process, or a :class:`DiagnosticsError` saying plainly why there
    is none (the port turned off, an old runtime, another TMPDIR we cannot see)."""
    path = find_socket(pid)
    if path is not None:
        return path
    env = read_environ(pid)
    for name in _SWITCHES:
        if env.get(name, "").strip() == "0":
            raise DiagnosticsError(
                f"pid {pid}: a .NET process with its diagnostics port turned off ({name}=0 in "
                "its environment): it cannot be sampled from outside; run it without that "
                "setting, or use profkit run (trace mode) to profile it from its start"
            )
    where = target_tmpdir(pid)
    hint = "" if env else " (its environment is not readable from here: another user?)"
    raise DiagnosticsError(
        f"pid {pid}: a .NET process without a diagnostics socket in {where}{hint}: "
        "COMPlus_EnableDiagnostics=0, a runtime older than 3.0, or still starting"
    )
