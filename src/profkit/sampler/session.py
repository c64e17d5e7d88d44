"""The sampler loop: sample a process (and its Python children) at a rate, build profiles.

One :class:`SamplerSession` samples one target pid from outside at ``rate`` Hz, on a
fixed schedule. A late read's weight covers the whole gap since the previous one, split
between the stacks seen at either end of it (:meth:`ProcessRecorder.add_wall`), so
wall-based totals stay true to the clock on a busy machine. Modes say which threads count and with what weight:

* ``wall``: every thread, weighted by the wall time since the previous tick;
* ``cpu``: every thread that ran, weighted by its own CPU time since its previous sample
  (``/proc/PID/task/TID/schedstat``); a thread that used none is left out;
* ``gil``: only the thread holding the GIL, weighted by wall time;
* ``active``: wall time, idle threads left out (a thread counts when the kernel has it
  running or runnable at the sample: state ``R``).

Samples are aggregated by raw stack (recorder.py: one dict update per thread per tick);
the call trees are built once at the end, so the per-sample cost does not grow with stack
depth beyond the walk itself. Child processes are looked for every ``CHILD_LOOK_S`` and
sampled too when they run Python (a ``fork`` of the target always does; a child that
``exec``s something else is dropped, and re-found if it later execs Python).
"""

from __future__ import annotations

import contextlib
import ctypes
import sys
import time
from collections.abc import Callable
from typing import Any

from profkit.calltree.model import CallProfile
from profkit.sampler.dumping import dump, format_dump, is_sampleable
from profkit.sampler.errors import AttachError, PermissionDenied, ProcessGone
from profkit.sampler.options import MODES, Mode, SamplerOptions, SamplerStats
from profkit.sampler.procinfo import ChildWatch, children, exe_path, is_alive, read_maps
from profkit.sampler.reader import CodeInfo, StackReader
from profkit.sampler.recorder import ProcessRecorder

__all__ = [
    "MODES",
    "Mode",
    "ProcessRecorder",
    "SamplerOptions",
    "SamplerSession",
    "SamplerStats",
    "attach_reader",
    "dump",
    "format_dump",
    "is_sampleable",
    "sample_pid",
]

#: Seconds between looks for new child processes. A child is sampled from the look that
#: finds it (plus its attach, ~1 ms), so one that ends sooner than this after it started
#: may be missed: the documented floor (docs/sampler.md, --help). A look lists /proc
#: (~50-250 us), about 1 % of a core at this cadence, on the sampler's side only.
CHILD_LOOK_S = 0.02
#: Seconds between checks of the processes followed for exit and exec (reads their maps).
CHILD_SCAN_S = 0.1
#: How far (ns) the loop may fall behind and still catch up: a late wake-up under load is
#: made good by reading at once, without sleeping, until back on schedule (issue #12's
#: "samples delivered" goal). Those reads see nearly the same instant; each weighs only
#: the time since the read before it, so they add samples, not time. Further behind, the
#: schedule restarts from now.
CATCH_UP_NS = 50_000_000
#: A gap between reads longer than this (ns) is a stall, not load: the sampler was
#: stopped (SIGSTOP, a debugger) and nothing says where the time went, so it is not
#: charged to any stack but counted as ``unsampled_ns`` and shown. Shorter gaps (a loaded
#: machine keeps the sampler off the CPU for 1-100 ms at a time) are charged in full:
#: see :meth:`ProcessRecorder.add_wall`.
STALL_NS = 1_000_000_000
_monotonic_ns = time.monotonic_ns
_perf_ns = time.perf_counter_ns


def _set_timer_slack_ns(ns: int) -> None:
    """Ask the kernel for precise sleeps (default slack is 50 µs: half a 10 kHz interval)."""
    with contextlib.suppress(Exception):
        ctypes.CDLL(None).prctl(29, ctypes.c_ulong(ns), 0, 0, 0)  # PR_SET_TIMERSLACK


def attach_reader(pid: int, wait_s: float = 0.0) -> StackReader:
    """:meth:`StackReader.attach`, retried for up to ``wait_s`` while the target starts.

    Why retry: a just-spawned child is not Python yet (it may still be the fork of its
    parent, or its interpreter not initialised); permission errors are final at once.
    """
    deadline = time.monotonic() + wait_s
    delay = 0.0005
    while True:
        try:
            return StackReader.attach(pid)
        except PermissionDenied:
            raise
        except AttachError:
            if time.monotonic() >= deadline or not is_alive(pid):
                raise
        time.sleep(delay)
        delay = min(delay * 2, 0.02)


class SamplerSession:
    """Sample ``pid`` (and its Python children) from outside; build profiles at the end."""

    def __init__(self, pid: int, options: SamplerOptions | None = None, *, wait_s: float = 0.0):
        self.options = options or SamplerOptions()
        self.pid = pid
        self.stats = SamplerStats()
        self.start_time_ns = time.time_ns()
        self._stop = False
        self.recorders: dict[int, ProcessRecorder] = {}
        self._watched: dict[int, str] = {}  #: non-Python descendants: pid → exe
        # Children that exist at attach are found once, through their parent's links.
        self._children = ChildWatch()
        self._initial = True
        reader = attach_reader(pid, wait_s)
        self.recorders[pid] = self._recorder(pid, reader)

    def _recorder(self, pid: int, reader: StackReader | None) -> ProcessRecorder:
        rec = ProcessRecorder(
            pid, reader, exe_path(pid), _runtime_map(pid, reader), _monotonic_ns()
        )
        rec.argv = _cmdline(pid)
        if reader is not None:
            rec.python = reader.layout.version
        return rec

    def stop(self) -> None:
        """Ask the loop to end after the current tick (safe from a signal handler)."""
        self._stop = True

    @property
    def done(self) -> bool:
        return self._stop or all(r.ended for r in self.recorders.values())

    def run(
        self,
        *,
        on_tick: Callable[[SamplerSession], None] | None = None,
        every_s: float = 1.0,
        until: Callable[[], bool] | None = None,
    ) -> SamplerStats:
        """Sample until the duration is over, every process ended, stop() or ``until()``.

        ``on_tick`` (e.g. ``profkit top``'s display) is called every ``every_s`` seconds.
        """
        _set_timer_slack_ns(1000)
        interval = max(int(1e9 / self.options.rate), 1)
        start = _monotonic_ns()
        deadline = start + int(self.options.duration * 1e9) if self.options.duration else None
        next_tick = start
        last = start
        own = 0  #: ns the previous tick took after its read began (see add_wall's own_ns)
        next_scan = start + int(CHILD_SCAN_S * 1e9)
        next_look = start
        next_call = start + int(every_s * 1e9)
        stats = self.stats
        sleep = time.sleep
        try:
            while not self.done:
                now = _monotonic_ns()
                if deadline is not None and now >= deadline:
                    break
                if now - next_tick > interval:
                    stats.late += 1
                t0 = _perf_ns()
                gap = now - last if stats.ticks else interval
                if gap > STALL_NS:
                    stats.unsampled_ns += gap - STALL_NS  # nobody knows where it went
                    gap = STALL_NS
                if gap > 2 * interval:
                    stats.late_ns += gap - interval
                self.tick(gap, interval, own)
                last = now
                if now >= next_scan:
                    self.scan()
                    next_scan = now + int(CHILD_SCAN_S * 1e9)
                if now >= next_look:
                    self.look()
                    next_look = now + int(CHILD_LOOK_S * 1e9)
                stats.busy_ns += _perf_ns() - t0
                stats.ticks += 1
                if until is not None and until():
                    break
                if on_tick is not None and now >= next_call:
                    on_tick(self)
                    next_call = now + int(every_s * 1e9)
                next_tick += interval
                after = _monotonic_ns()
                own = after - now
                if next_tick < after - max(CATCH_UP_NS, 20 * interval):
                    next_tick = after  # far behind (a stall): start the schedule again
                wait = next_tick - after
                if deadline is not None:
                    wait = min(wait, deadline - after)
                if wait > 0:
                    sleep(wait / 1e9)
        finally:
            end = _monotonic_ns()
            stats.elapsed_ns = end - start
            stats.asked = max(int(stats.elapsed_ns * self.options.rate / 1e9), 1)
        return stats

    def tick(self, wall_ns: int, interval_ns: int | None = None, own_ns: int = 0) -> None:
        """One sample of every live process, ``wall_ns`` after the previous one
        (``interval_ns``: the schedule's; by default the rate's), ``own_ns`` of which the
        previous tick took (paid out over later reads: :meth:`ProcessRecorder.add_wall`)."""
        if interval_ns is None:
            interval_ns = max(int(1e9 / self.options.rate), 1)
        mode = self.options.mode
        for rec in list(self.recorders.values()):
            reader = rec.reader
            if rec.ended or reader is None:
                continue
            # cpu: the clocks are read before the walk, which may wait for the target
            # (its mmap lock) and end when the target's call does: the CPU it used
            # meanwhile is the next read's, and paid out from there (see add_cpu).
            cpu_at = {t: c.read() for t, c in rec.clocks.items()} if mode == "cpu" else {}
            try:
                stacks = reader.sample(want_gil=mode == "gil")
            except ProcessGone:
                rec.close("exited")
                continue
            except PermissionDenied:
                if rec.pid == self.pid and not rec.ticks:
                    raise
                rec.close("not permitted")
                continue
            rec.ticks += 1
            if not stacks:
                rec.torn_ticks += 1
                rec.missed(wall_ns, own_ns)
                if not is_alive(rec.pid):
                    rec.close("exited")
                continue
            if mode == "wall":
                rec.add_wall(stacks, wall_ns, interval_ns, own_ns)
            elif mode == "gil":
                rec.add_wall([s for s in stacks if s.holds_gil], wall_ns, interval_ns, own_ns)
            elif mode == "cpu":
                share = min(own_ns / wall_ns, 1.0) if wall_ns > 0 else 0.0
                for s in stacks:
                    tid = s.native_id
                    clock = rec.clock(tid)
                    used = clock.delta_to(cpu_at[tid]) if tid in cpu_at else clock.delta()
                    if used > 0:
                        rec.add_cpu(s, used, share)
            else:  # active
                running = [s for s in stacks if rec.clock(s.native_id).running()]
                rec.add_wall(running, wall_ns, interval_ns, own_ns)

    def scan(self) -> None:
        """Notice exec, and end processes that have gone (every ``CHILD_SCAN_S``)."""
        for rec in list(self.recorders.values()):
            if rec.ended:
                continue
            if not is_alive(rec.pid):
                rec.close("exited")
                continue
            if rec.reader is not None and _runtime_map(rec.pid, rec.reader) != rec.runtime_map:
                self._exec(rec)

    def look(self) -> None:
        """Follow new child processes, and watched ones that exec'd Python (every
        ``CHILD_LOOK_S``: what decides how short-lived a child may be and still be seen)."""
        if self._initial and self.options.follow_children:
            self._initial = False
            for child in children(self.pid):
                if child not in self.recorders:
                    self._try_follow(child)
        for pid, exe in list(self._watched.items()):
            if not is_alive(pid):
                del self._watched[pid]
            elif exe_path(pid) != exe:
                self._watched[pid] = exe_path(pid)
                self._try_follow(pid)
        if not self.options.follow_children:
            return
        parents = {p for p, r in self.recorders.items() if not r.ended} | set(self._watched)
        for child in self._children.new_children(parents):
            if child not in self.recorders and child not in self._watched:
                self._try_follow(child)

    def _try_follow(self, pid: int) -> None:
        try:
            reader = StackReader.attach(pid)
        except AttachError:
            self._watched[pid] = exe_path(pid)
            return
        self._watched.pop(pid, None)
        rec = self.recorders.get(pid)
        if rec is None:
            rec = self.recorders[pid] = self._recorder(pid, reader)
            self._baseline(rec)

    def _baseline(self, rec: ProcessRecorder) -> None:
        """Read a process just found once, without counting it: the stacks its first
        counted read's gap is split with, and (``cpu``) its threads' CPU clocks started
        (else the CPU it used before its first read would be lost). See
        :meth:`ProcessRecorder.baseline`."""
        reader = rec.reader
        if reader is None:
            return
        mode = self.options.mode
        try:
            stacks = reader.sample(want_gil=mode == "gil")
        except (ProcessGone, PermissionDenied):
            return  # the next tick finds out and says so
        if not stacks:
            return
        if mode == "cpu":
            for s in stacks:
                rec.clock(s.native_id)
            return
        if mode == "gil":
            stacks = [s for s in stacks if s.holds_gil]
        elif mode == "active":
            stacks = [s for s in stacks if rec.clock(s.native_id).running()]
        rec.baseline(stacks)

    def _exec(self, rec: ProcessRecorder) -> None:
        """The process exec'd: read the new image if it is Python, else stop sampling it."""
        rec.execs += 1
        rec.exe = exe_path(rec.pid)
        try:
            reader = attach_reader(rec.pid, 0.2)
        except AttachError as exc:
            rec.reader = None
            rec.runtime_map = 0
            rec.ended = f"exec'd a non-Python program ({rec.exe}): {exc}"
            rec.ended_ns = _monotonic_ns()
            self._watched[rec.pid] = rec.exe
            return
        rec.reader = reader
        rec.runtime_map = _runtime_map(rec.pid, reader)
        rec.python = reader.layout.version
        rec.argv = _cmdline(rec.pid)

    def profiles(
        self, keep: Callable[[CodeInfo], bool] | None = None, program_only: bool = False
    ) -> dict[int, CallProfile]:
        """One profile per sampled process (the target first), processes with samples only.

        ``keep``: see :meth:`ProcessRecorder.profile`.
        """
        out: dict[int, CallProfile] = {}
        for pid, rec in self.recorders.items():
            if pid != self.pid and not rec.samples:
                continue
            extra: dict[str, Any] = {"start_time_ns": self.start_time_ns}
            if pid == self.pid:
                extra["sampler_stats"] = self.stats.as_dict()
            out[pid] = rec.profile(self.options, extra, keep, program_only)
        return out

    def close(self) -> None:
        for rec in self.recorders.values():
            rec.close(rec.ended or "stopped")


def _runtime_map(pid: int, reader: StackReader | None) -> int:
    """Start address of the mapping of the file holding _PyRuntime (0 when not mapped)."""
    if reader is None:
        return 0
    try:
        maps = read_maps(pid)
    except AttachError:
        return 0
    path = reader.target.path
    return next((m.start for m in maps if m.path == path and m.offset == 0), 0)


def _cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            raw = f.read()
    except OSError:
        return []
    return [a.decode("utf-8", "surrogateescape") for a in raw.split(b"\0") if a]


def sample_pid(pid: int, options: SamplerOptions | None = None) -> dict[int, CallProfile]:
    """Sample a running process until ``options.duration`` or its exit; its profiles."""
    session = SamplerSession(pid, options)
    try:
        session.run()
    finally:
        session.close()
    return session.profiles()


if sys.platform != "linux":  # pragma: no cover
    raise ImportError("profkit.sampler reads /proc and process_vm_readv: Linux only")
