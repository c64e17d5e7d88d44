"""One sampled process's samples, aggregated by (thread, raw stack), and the profile
they make.

Why apart from the loop (session.py): the loop's job is timing (when to read, what weight
a sample gets); this is bookkeeping (one dict update per thread per tick) and, once at the
end, building call trees in profkit's profile model, so the per-sample cost does not grow
with stack depth beyond the walk itself.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from profkit._record import field, record
from profkit.calltree.building import add_stack
from profkit.calltree.model import CallNode, CallProfile, ThreadTree
from profkit.sampler.codes import CodeInfo, Stack
from profkit.sampler.options import SamplerOptions
from profkit.sampler.procinfo import ThreadClock, thread_name
from profkit.sampler.reader import StackReader, ThreadStack

#: Distinct (thread, stack) entries kept per process before new ones go to a catch-all.
MAX_STACKS = 500_000
#: The sampler's own time after a read (naming, recording: see :meth:`ProcessRecorder.add_wall`)
#: is paid out over the following reads, 1/SPREAD_READS of what is pending at each.
SPREAD_READS = 32
_monotonic_ns = time.monotonic_ns


@record
class _Entry:
    stack: Stack
    samples: int = 0
    weight_ns: int = 0


@record
class ProcessRecorder:
    """The samples of one process, aggregated by (thread, raw stack)."""

    pid: int
    reader: StackReader | None
    exe: str
    runtime_map: int  #: start of the libpython/python mapping (changes when it execs)
    started_ns: int
    argv: list[str] = field(default_factory=list)
    entries: dict[tuple[int, bytes], _Entry] = field(default_factory=dict)
    names: dict[int, str] = field(default_factory=dict)
    idents: dict[int, int] = field(default_factory=dict)
    clocks: dict[int, ThreadClock] = field(default_factory=dict)
    samples: int = 0  #: thread stacks recorded
    ticks: int = 0  #: ticks that read this process
    torn_ticks: int = 0
    ended: str = ""  #: why sampling this process stopped ('' while it goes on)
    ended_ns: int = 0
    python: str = ""
    execs: int = 0
    #: each counted thread's entry at the previous read of this process (None: no read
    #: yet, or the last one was torn): where the first half of a late gap goes
    last: dict[int, _Entry] | None = None
    owed_ns: int = 0  #: wall time of reads that failed (torn), charged at the next good one
    owed_own_ns: int = 0  #: the sampler's own part of ``owed_ns``
    #: per thread: the sampler's own time (or the thread's CPU in it) not yet paid out,
    #: and the entry that took the last payment (where the rest goes at close)
    pending: dict[int, int] = field(default_factory=dict)
    tails: dict[int, _Entry] = field(default_factory=dict)

    def add_wall(
        self, stacks: list[ThreadStack], wall_ns: int, interval_ns: int, own_ns: int = 0
    ) -> None:
        """Count ``stacks`` (this read's counted threads) with ``wall_ns``, the wall time
        since the previous read, ``interval_ns`` being what was asked between reads and
        ``own_ns`` the part of ``wall_ns`` the sampler spent on the previous read itself.

        Why split a late gap: nobody looked during it (the machine kept the sampler off
        the CPU), so charging it all to the stack seen at its end over-weights whatever
        runs when the sampler wakes, and capping it (what profkit did before) made
        absolute times 40-60 % short on a busy machine. The part beyond one interval is
        split in halves: one to the stack the thread had at the previous read, one to the
        stack it has now. Unchanged stack: it all lands there (the time was very likely
        its). Changed once at an unknown point of the gap: half each is the expected
        share. A thread counted at only one end (it started or ended, took or released
        the GIL, became idle) gets only the half at that end. A thread counted at both
        ends gets the whole gap, as the clock says; none of it is dropped.

        Why ``own_ns`` is apart: that part of the gap is as long as it is *because of* the
        stack the previous read saw (a new stack is named with a read per frame; a read
        waits for the target's mmap lock while it maps or unmaps a data-stack chunk), so
        neither end may have it. Charged to the previous stack, half of it went to
        sympy's ``monomial_mul``, called at a chunk boundary: twice py-spy's and perf's
        share (bench/sampler_shares.py). The sampler cannot know what ran then, so it is
        paid out over the next reads (:meth:`_paid`), like time nobody looked at.
        """
        wall_ns += self.owed_ns
        own_ns = min(max(own_ns, 0) + self.owed_own_ns, wall_ns)
        self.owed_ns = self.owed_own_ns = 0
        wall_ns -= own_ns
        prev = self.last
        now: dict[int, _Entry] = {}
        half = (wall_ns - interval_ns) // 2 if prev is not None and wall_ns > interval_ns else 0
        for s in stacks:
            tid = s.native_id
            now[tid] = self.add(s, wall_ns - half + self._paid(tid, own_ns))
            before = prev.get(tid) if half and prev is not None else None
            if before is not None:
                before.weight_ns += half  # the same entry when the stack is unchanged
        if half and prev is not None:
            for tid, before in prev.items():
                if tid not in now:
                    before.weight_ns += half
        self.last = now

    def add_cpu(self, stack: ThreadStack, used_ns: int, own_share: float) -> None:
        """Count ``stack`` with ``used_ns``, its thread's CPU time since its previous
        sample; ``own_share`` of it (the sampler's own part of the wall time between the
        reads) is paid out over the next reads, for the reason given in :meth:`add_wall`."""
        own = min(int(used_ns * own_share), used_ns)
        self.add(stack, used_ns - own + self._paid(stack.native_id, own))

    def _paid(self, tid: int, own_ns: int) -> int:
        """Add ``own_ns`` to thread ``tid``'s pending own time; what this read gets of it.

        1/SPREAD_READS at a time: a steady cost (~50-100 us a read) is paid back about as
        it accrues, while a long one (a read that waited 20 ms) is spread over the ~30
        reads after it instead of landing on the stack seen next, which can be as tied
        to it as the one before (the wait ends when the target unlocks).
        """
        pending = self.pending.get(tid, 0) + own_ns
        pay = pending // SPREAD_READS
        self.pending[tid] = pending - pay
        return pay

    def missed(self, wall_ns: int, own_ns: int = 0) -> None:
        """A read failed (a torn stack): its wall time is charged at the next good read."""
        self.owed_ns += wall_ns
        self.owed_own_ns += min(max(own_ns, 0), wall_ns)

    def add(self, stack: ThreadStack, weight_ns: int) -> _Entry:
        entry = self._entry(stack)
        entry.samples += 1
        entry.weight_ns += weight_ns
        self.samples += 1
        self.tails[stack.native_id] = entry
        return entry

    def baseline(self, stacks: list[ThreadStack]) -> None:
        """The counted threads' stacks when the process is first found, kept as the
        "previous read" of its first real one, with no sample and no weight.

        Why: a new child's first read covers the time since it was found, which on a
        busy machine is up to ~100 ms (findings N7: a Pool worker's first read gave
        ``sq`` 116 ms of a 67 ms life in it). With its stack at discovery known, that
        gap is split like any late one instead of charged whole to the first stack read.
        """
        self.last = {s.native_id: self._entry(s) for s in stacks}

    def _entry(self, stack: ThreadStack) -> _Entry:
        key = (stack.native_id, stack.key)
        entry = self.entries.get(key)
        if entry is None:
            if len(self.entries) >= MAX_STACKS:
                key = (stack.native_id, b"")
                entry = self.entries.get(key)
            if entry is None:
                entry = self.entries[key] = _Entry(stack.frames if key[1] else ())
            if stack.native_id not in self.names:
                named = self.reader.thread_name(stack.thread_id) if self.reader else None
                self.names[stack.native_id] = named or self.thread_label(stack.native_id)
                self.idents[stack.native_id] = stack.thread_id
        return entry

    def thread_label(self, tid: int) -> str:
        return thread_label(self.pid, tid)

    def clock(self, tid: int) -> ThreadClock:
        found = self.clocks.get(tid)
        if found is None:
            found = self.clocks[tid] = ThreadClock(self.pid, tid)
        return found

    def close(self, why: str) -> None:
        # own time still pending goes to each thread's last counted stack: totals stay
        # true to the clock
        for tid, pending in self.pending.items():
            tail = self.tails.get(tid)
            if tail is not None:
                tail.weight_ns += pending
        self.pending.clear()
        if not self.ended:
            self.ended = why
            self.ended_ns = _monotonic_ns()
        for c in self.clocks.values():
            c.close()
        self.clocks.clear()

    def profile(
        self,
        options: SamplerOptions,
        extra: dict[str, Any],
        keep: Callable[[CodeInfo], bool] | None = None,
        program_only: bool = False,
    ) -> CallProfile:
        """The call trees of this process in profkit's profile model (mode ``sample``).

        ``keep`` hides the frames it rejects, charging their time to the nearest shown
        caller (what ``--prefix`` does in-process). ``program_only`` leaves out the main
        thread's samples outside the program's main code (the interpreter's start-up and
        shutdown: an in-process profiler attaches at the program's first line).
        """
        profile = CallProfile(mode="sample")
        lines = self._build_trees(profile, keep, program_only)
        end = self.ended_ns or _monotonic_ns()
        reader = self.reader
        profile.metadata = {
            "profiler": "profkit.sampler",
            "pid": self.pid,
            "argv": self.argv,
            "python": self.python,
            "start_time_ns": extra.get("start_time_ns", 0),
            "duration_ns": max(end - self.started_ns, 0),
            "settings": {"mode": "sample", "sampler_mode": options.mode, "rate": options.rate},
            "sampler": {
                "mode": options.mode,
                "rate": options.rate,
                "ticks": self.ticks,
                "samples": self.samples,
                "torn_ticks": self.torn_ticks,
                "ended": self.ended or "stopped",
                "execs": self.execs,
                "native_walker": bool(reader and reader.native),
                "layout": reader.layout.provenance if reader else "",
                "thread_idents": {str(k): v for k, v in self.idents.items()},
                # Where the time was, per line: [frame, line, samples], innermost frames.
                "lines": sorted([f, ln, n] for (f, ln), n in lines.items()),
            },
        }
        profile.metadata.update(extra)
        return profile

    def _build_trees(
        self,
        profile: CallProfile,
        keep: Callable[[CodeInfo], bool] | None,
        program_only: bool,
    ) -> dict[tuple[int, int], int]:
        """Fill ``profile``'s frames and threads from the entries; the innermost frames'
        samples by (frame, line) (what ``sampler.lines`` keeps)."""
        main_roots = {"__main__", "runpy", ""}
        if self.reader is not None and self.reader.namer.main_module:
            main_roots.add(self.reader.namer.main_module)
        trees: dict[int, ThreadTree] = {}
        frame_ids: dict[CodeInfo, int] = {}
        lines: dict[tuple[int, int], int] = {}
        for (tid, _key), entry in self.entries.items():
            if not entry.samples and not entry.weight_ns:
                continue  # a baseline stack no time was charged to
            if (
                program_only
                and tid == self.pid
                and (not entry.stack or entry.stack[-1][0].module not in main_roots)
            ):
                continue
            tree = trees.get(tid)
            if tree is None:
                # keyed by the OS id, which is also what exports show (Chrome tid, pprof)
                name = self.names.get(tid, f"Thread-{tid}")
                tree = trees[tid] = ThreadTree(tid, name, native_id=tid)
            stack = []
            for info, _line in reversed(entry.stack):
                if keep is not None and not keep(info):
                    continue
                fid = frame_ids.get(info)
                if fid is None:
                    fid = frame_ids[info] = profile.frame_id(info.frame)
                stack.append(fid)
            add_stack(tree.root, stack, entry.samples, entry.weight_ns)
            if entry.stack and entry.stack[0][0] in frame_ids:
                info, line = entry.stack[0]
                at = (frame_ids[info], line)
                lines[at] = lines.get(at, 0) + entry.samples
        for tree in trees.values():
            _fix_root(tree.root)
        profile.threads = sorted(
            trees.values(), key=lambda t: (t.thread_id != self.pid, t.thread_id)
        )
        return lines


def thread_label(pid: int, tid: int) -> str:
    """The name of a thread whose ``threading`` name could not be read from the target
    (:meth:`StackReader.thread_name`, tried first): ``MainThread`` for the main thread (as
    Python and in-process profiles call it), another thread's kernel name (``comm``;
    CPython before 3.14 does not pass ``threading`` names to the kernel, so it is often the
    program's), ``Thread-<tid>`` once it is gone."""
    if tid == pid:
        return "MainThread"
    return thread_name(pid, tid) or f"Thread-{tid}"


def _fix_root(root: CallNode) -> None:
    """A root's exclusive time is its weight outside any frame (threads with no frame)."""
    root.exclusive_ns = root.inclusive_ns - sum(c.inclusive_ns for c in root.children.values())
    root.calls = 0
