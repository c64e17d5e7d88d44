"""What /proc says about a target: its mapped files, threads, names and CPU times.

Everything here is read fresh (a target may exec, fork or lose threads at any moment)
and a vanished process or thread is an ordinary answer (None, an empty list), not an
error, so the sampler loop can end a profile cleanly.
"""

from __future__ import annotations

import os
import re

from profkit._record import record
from profkit.sampler.errors import AttachError, PermissionDenied

_LIBPYTHON = re.compile(r"libpython(\d+)\.(\d+)[a-z]*\.so")
_PYTHON_EXE = re.compile(r"python(\d+)\.(\d+)[a-z]*$")


@record(frozen=True)
class Mapping:
    start: int
    end: int
    offset: int
    path: str


def read_maps(pid: int) -> list[Mapping]:
    """File-backed mappings of ``pid`` (raises AttachError when the process is gone)."""
    try:
        with open(f"/proc/{pid}/maps") as f:
            text = f.read()
    except FileNotFoundError:
        raise AttachError(f"pid {pid}: no such process") from None
    except PermissionError:
        from profkit.sampler.memory import permission_reason

        raise PermissionDenied(
            f"pid {pid}: not permitted to read /proc/{pid}/maps: {permission_reason(pid)}"
        ) from None
    except ProcessLookupError:
        raise AttachError(f"pid {pid}: no such process") from None
    out = []
    for line in text.splitlines():
        parts = line.split(None, 5)
        if len(parts) < 6 or not parts[5].startswith("/"):
            continue
        lo, _, hi = parts[0].partition("-")
        path = parts[5]
        if path.endswith(" (deleted)"):
            path = path[: -len(" (deleted)")]
        out.append(Mapping(int(lo, 16), int(hi, 16), int(parts[2], 16), path))
    return out


def exe_path(pid: int) -> str:
    """The target's executable ('' when unreadable)."""
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return ""


def python_candidates(pid: int, maps: list[Mapping]) -> list[tuple[str, int]]:
    """(path, load address of file offset 0) of libpython then the executable, if mapped."""
    starts: dict[str, int] = {}
    for m in maps:
        if m.offset == 0 and m.path not in starts:
            starts[m.path] = m.start
    exe = exe_path(pid)
    libs = [p for p in starts if _LIBPYTHON.search(os.path.basename(p))]
    ordered = libs + ([exe] if exe in starts else [])
    return [(p, starts[p]) for p in ordered]


def version_from_name(path: str) -> str | None:
    """'3.10' from a libpython3.10.so or python3.10 path, else None."""
    base = os.path.basename(path)
    m = _LIBPYTHON.search(base) or _PYTHON_EXE.search(base)
    return f"{m.group(1)}.{m.group(2)}" if m else None


def open_target_file(pid: int, path: str) -> str:
    """A path under which this process can open the target's file (its mount namespace first)."""
    rooted = f"/proc/{pid}/root{path}"
    return rooted if os.path.exists(rooted) else path


def thread_ids(pid: int) -> list[int]:
    """Native ids of the target's threads ([] once it has gone)."""
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return []


def thread_name(pid: int, tid: int) -> str:
    """The kernel's name of a thread (``comm``), '' when it has gone."""
    try:
        with open(f"/proc/{pid}/task/{tid}/comm") as f:
            return f.read().rstrip("\n")
    except OSError:
        return ""


def children(pid: int) -> list[int]:
    """Direct children of ``pid``.

    ``/proc/PID/task/TID/children`` when the kernel has it (CONFIG_PROC_CHILDREN), else a
    scan of every ``/proc/N/stat`` for parent ``pid`` (~1 ms for a hundred processes).
    """
    tids = thread_ids(pid)
    if tids and os.path.exists(f"/proc/{pid}/task/{tids[0]}/children"):
        out: list[int] = []
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/children") as f:
                    out.extend(int(c) for c in f.read().split())
            except OSError:
                continue
        return out
    return [child for child, parent in parents().items() if parent == pid]


class ChildWatch:
    """New children of a set of processes, by diffing /proc's listing between calls.

    Why: without CONFIG_PROC_CHILDREN the only way to find children is every process's
    ``stat``; reading ~100 of them costs ~1 ms, too much every 100 ms beside a 1 kHz
    sampler. The listing alone costs ~50 µs; only pids new since the last call are read.
    """

    def __init__(self) -> None:
        self._known: set[int] = {int(e) for e in os.listdir("/proc") if e.isdigit()}

    def new_children(self, parents_of_interest: set[int]) -> list[int]:
        now = {int(e) for e in os.listdir("/proc") if e.isdigit()}
        fresh = sorted(now - self._known)
        self._known = now
        found = []
        added = set(parents_of_interest)
        for pid in fresh:  # ascending: a grandchild comes after its parent
            ppid = parent_of(pid)
            if ppid in added:
                found.append(pid)
                added.add(pid)
        return found


def parent_of(pid: int) -> int:
    """The parent pid of ``pid`` (0 once it has gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return 0
    fields = stat[stat.rfind(b")") + 2 :].split()
    return int(fields[1]) if len(fields) > 1 else 0


def parents() -> dict[int, int]:
    """pid → parent pid of every process visible in /proc."""
    out: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 1:
            out[int(entry)] = int(fields[1])
    return out


def thread_state(pid: int, tid: int) -> str:
    """The thread's scheduler state letter (R running, S sleeping, ...), '' once gone."""
    try:
        with open(f"/proc/{pid}/task/{tid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return ""
    at = stat.rfind(b")") + 2
    return stat[at : at + 1].decode("ascii", "replace")


def is_alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return False
    state = stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3]
    return state not in (b"Z", b"X", b"")


class ThreadClock:
    """A thread's CPU time (ns, from ``schedstat``) and state, one ``pread`` each.

    Why schedstat: ``/proc/PID/task/TID/stat``'s utime/stime tick at 100 Hz, far coarser
    than the sampling interval; ``schedstat``'s first field is the thread's run time in ns.
    The files stay open between samples: a ``pread`` at offset 0 regenerates them.
    """

    __slots__ = ("fd", "last", "stat_fd")

    def __init__(self, pid: int, tid: int) -> None:
        self.fd = _open(f"/proc/{pid}/task/{tid}/schedstat")
        self.stat_fd = _open(f"/proc/{pid}/task/{tid}/stat")
        self.last = self.read() or 0

    def read(self) -> int | None:
        """CPU time used so far, or None once the thread has gone."""
        if self.fd is None:
            return None
        try:
            data = os.pread(self.fd, 64, 0)
            return int(data.split(None, 1)[0])
        except (OSError, ValueError, IndexError):
            return None

    def delta(self) -> int:
        """CPU time used since the previous call (0 once the thread has gone)."""
        return self.delta_to(self.read())

    def delta_to(self, now: int | None) -> int:
        """CPU time used from the previous call up to ``now``, a :meth:`read` taken
        earlier (0 when it was None: the thread had gone)."""
        if now is None:
            return 0
        used, self.last = now - self.last, now
        return max(used, 0)

    def running(self) -> bool:
        """True when the thread is on a CPU or runnable (state ``R``) right now."""
        if self.stat_fd is None:
            return False
        try:
            stat = os.pread(self.stat_fd, 512, 0)
        except OSError:
            return False
        at = stat.rfind(b")") + 2
        return stat[at : at + 1] == b"R"

    def close(self) -> None:
        for fd in (self.fd, self.stat_fd):
            if fd is not None:
                os.close(fd)
        self.fd = self.stat_fd = None


def _open(path: str) -> int | None:
    try:
        return os.open(path, os.O_RDONLY)
    except OSError:
        return None
