"""The memory profiler: allocated bytes by stack (``profkit.profilers.memory:MemoryProfiler``).

``profkit run --mode memory`` attaches it like the trace and sample profilers. It selects
``OBJECT_ALLOCATED`` (the heap half of the profiling API, :mod:`profkit.heap`) with the
sampling mean of ``--alloc-sample``, keeps the ``object_allocated`` / ``object_freed``
notifications in the order they came, and at the end turns them into a profile in the usual
file format whose weights are **bytes** (``mode: "memory"``, see docs/profile-format.md):

* the threads' trees are the **allocated** bytes (every sampled allocation's weight, freed
  or not) by stack, per thread: ``calls`` counts samples, ``inclusive_ns``/``exclusive_ns``
  hold bytes;
* ``metadata["memory_views"]`` holds the two other views, **peak** (alive when the estimated
  live total was highest) and **leaked** (alive when profiling stopped), as rows of
  ``[frame indices outermost first, samples, bytes]``, so ``report``/``export`` show any of
  the three with :func:`profkit.report.metric.memory_view` and nothing else changed.

Weights are post-stratified at the end: the allocator hooks tally every allocation's bytes by
size class exactly, and each sample's weight is scaled so each class's samples add up to its
exact bytes (``metadata["alloc_strata"]``; docs/heap.md, "Post-stratification"). Bytes of a
class no sample fell in are an ``[unattributed]`` frame under the main thread's root.

Why the events are kept rather than aggregated as they come: the peak view needs the live
set at the moment of the peak, which is only known at the end; there is one event per
sampled allocation (one per ``--alloc-sample`` bytes on average), so the log stays small.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable

from profkit.api import EventMask
from profkit.api.ids import FunctionId, ObjectId, ThreadId
from profkit.api.info import ProfilerInfo
from profkit.api.strata import Strata
from profkit.calltree.building import tree_of
from profkit.calltree.model import CallProfile, Frame, ThreadTree, replay
from profkit.profilers.base import SettingsProfiler
from profkit.profilers.elt.names import full_name

TYPE_CHECKING = False  # typing's names for type checkers only: memory mode's start-up
if TYPE_CHECKING:  # imports no typing (its objects would sit in the program's tracked heap)
    from typing import Any

#: metadata["metric"] of a memory profile's trees: what their weights are
METRIC = "alloc_bytes"

#: the frame of bytes in a size class no sample fell in (counted, with no stack to show)
UNATTRIBUTED = "[unattributed]"

#: a stack key: the thread and the shown functions' ids, outermost first
_Key = tuple[int, tuple[FunctionId, ...]]


class MemoryProfiler(SettingsProfiler):
    """Sampled allocations in, a byte-weighted :class:`CallProfile` out.

    Built like the ELT profilers (:class:`~profkit.profilers.base.SettingsProfiler`: the
    same constructor, ``from_settings`` and capture filter).
    ``settings.alloc_sample_bytes`` is the sampling mean.
    """

    mode_override = "memory"

    def __init__(
        self,
        settings: Any = None,
        *,
        standalone: bool = True,
        paused: bool = False,
        on_profile: Callable[[CallProfile], None] | None = None,
        main_module: tuple[str, str] | None = None,
        internal_files: Iterable[str] = (),
    ) -> None:
        super().__init__(
            settings,
            standalone=standalone,
            paused=paused,
            on_profile=on_profile,
            main_module=main_module,
            internal_files=internal_files,
        )
        self.mean_bytes = int(getattr(self.settings, "alloc_sample_bytes", 512 * 1024))
        #: lines for the end of the run (none yet: the allocation hooks' absence is in
        #: the metadata's backend)
        self.notes: list[str] = []
        self._lock = threading.Lock()
        #: ("a", id, weight, key, size) and ("f", id), in the order they were delivered
        self._log: list[tuple[Any, ...]] = []
        #: every sample delivered, kept or not: the strata count the same ones
        self._delivered = 0
        self._live: set[int] = set()
        self._keys: dict[tuple[int, tuple[FunctionId, ...]], _Key] = {}
        self._accepted: dict[FunctionId, bool] = {}
        self._started_ns = time.perf_counter_ns()
        self._started_wall_ns = time.time_ns()
        self._stopped_ns = 0

    # -- lifecycle --------------------------------------------------------------------
    def initialize(self, info: ProfilerInfo) -> None:
        self._info = info
        info.set_allocation_sampling(self.mean_bytes)
        info.set_event_mask(EventMask.OBJECT_ALLOCATED)

    def start_events(self) -> None:
        self._started_ns = time.perf_counter_ns()
        self._started_wall_ns = time.time_ns()
        self._paused = False

    def stop_events(self) -> None:
        """The program has ended. Allocations still in the collector's log are the
        program's and arrive at detach, so they are still taken; what profkit allocates
        from here on has no frame of the program and is left out (see :meth:`_key`)."""
        self._stopped_ns = time.perf_counter_ns()

    def quiet_this_thread(self) -> None:
        """Nothing per thread to quiet: allocations are attributed by their stacks."""

    def reset_after_fork(self) -> bool:
        """In a forked child: record the child alone from now on, in place (issue 22,
        item 13; the collector's allocation log is reset beside it, ``HeapEvents``). The
        parent's log and live set are put aside, not cleared: clearing them wrote to every
        entry's page, each copied from the parent for nothing. False (a new profiler is
        attached instead) when this one is not recording the program."""
        if self._paused or self.profile is not None or self._stopped_ns:
            return False
        _put_aside.append((self._log, self._live))
        self._lock = threading.Lock()  # another thread may have held the parent's at fork
        self._log = []
        self._live = set()
        self._delivered = 0  # the hooks' tallies start afresh in the child too
        self._started_ns = time.perf_counter_ns()
        self._started_wall_ns = time.time_ns()
        return True

    def adopt_after_fork(self, settings: Any, on_profile: Callable[[CallProfile], None]) -> bool:
        """In a forked child of ``profkit run``, before :meth:`reset_after_fork`: the
        child's settings and saver, as the start-up hook would build its profiler
        (:func:`profkit.profilers.elt.forked.take_settings`); the stacks' verdicts are made
        again with the child's capture filter."""
        from profkit.profilers.elt import forked

        if int(getattr(settings, "alloc_sample_bytes", self.mean_bytes)) != self.mean_bytes:
            return False
        if not forked.take_settings(self, settings, on_profile):
            return False
        self._accepted = {}
        return True

    def shutdown(self) -> None:
        self.profile = self.build_profile()
        if self.on_profile is not None:
            self.on_profile(self.profile)

    # -- notifications ------------------------------------------------------------------
    def object_allocated(
        self,
        object_id: ObjectId,
        type_name: str,
        size: int,
        weight: float,
        thread_id: ThreadId,
        function_ids: tuple[FunctionId, ...],
    ) -> None:
        self._delivered += 1
        if self._paused:
            return
        key = self._key(int(thread_id), function_ids)
        if key is None:
            return
        with self._lock:
            self._log.append(("a", int(object_id), weight, key, size))
            self._live.add(int(object_id))

    def object_freed(self, object_id: ObjectId) -> None:
        with self._lock:
            if int(object_id) in self._live:
                self._live.discard(int(object_id))
                self._log.append(("f", int(object_id)))

    def _key(self, thread: int, function_ids: tuple[FunctionId, ...]) -> _Key | None:
        """The shown part of a stack, interned; None when no frame of the program is on
        it (profkit's own start-up and detach work)."""
        accepted = self._accepted
        shown: list[FunctionId] = []
        for fid in function_ids:
            ok = accepted.get(fid)
            if ok is None:
                ok = accepted[fid] = self.accepts(self._function_info(fid))
            if ok:
                shown.append(fid)
        if not shown:
            return None
        raw = (thread, tuple(shown))
        key = self._keys.get(raw)
        if key is None:
            key = self._keys[raw] = raw
        return key

    # -- results ------------------------------------------------------------------------
    def build_profile(self) -> CallProfile:
        """The three views from the log: allocated (the trees), peak and leaked
        (``metadata["memory_views"]``), and the totals in the metadata."""
        with self._lock:
            log = list(self._log)
        strata = self._strata()
        if strata is not None:
            log = _scaled(log, strata)
        done = replay([(e[1], e[2], e[3]) if e[0] == "a" else (e[1], None, None) for e in log])
        allocated, at_peak, live = done.allocated, done.at_peak, done.leaked

        profile = CallProfile(mode="memory")
        frames: dict[FunctionId, int] = {}

        def frame_of(fid: FunctionId) -> int:
            index = frames.get(fid)
            if index is None:
                info = self._function_info(fid)
                name = full_name(info, self.main_module)
                index = frames[fid] = profile.frame_id(Frame(name, info.filename, info.first_line))
            return index

        by_thread: dict[int, list[tuple[tuple[int, ...], int, int]]] = {}
        for (thread, fids), (count, weight) in allocated.items():
            stack = tuple(frame_of(f) for f in fids)
            by_thread.setdefault(thread, []).append((stack, int(count), round(weight)))
        unattributed = strata.unattributed_bytes if strata is not None else 0
        if unattributed:
            main = threading.main_thread().ident or 0
            lost = profile.frame_id(Frame(UNATTRIBUTED))
            by_thread.setdefault(main, []).append(((lost,), 0, unattributed))
        for thread in sorted(by_thread):
            root = tree_of(by_thread[thread])
            name, native_id = self._thread_ids(thread)
            profile.threads.append(ThreadTree(thread, name, root, native_id))

        def rows(alive: Iterable[tuple[float, _Key]]) -> list[list[Any]]:
            summed: dict[tuple[int, ...], list[float]] = {}
            for weight, (_thread, fids) in alive:
                row = summed.setdefault(tuple(frame_of(f) for f in fids), [0, 0.0])
                row[0] += 1
                row[1] += weight
            return [[list(stack), int(n), round(w)] for stack, (n, w) in summed.items()]

        end = self._stopped_ns or time.perf_counter_ns()
        leaked = list(live.values())
        profile.metadata.update(
            {
                "profiler": f"{type(self).__module__}:{type(self).__qualname__}",
                "pid": os.getpid(),
                "argv": list(sys.argv),
                "python": sys.version.split()[0],
                "start_time_ns": self._started_wall_ns,
                "duration_ns": max(end - self._started_ns, 0),
                "settings": self.settings.as_dict() if hasattr(self.settings, "as_dict") else {},
                "metric": METRIC,
                "unit": "bytes",
                "alloc_sample_bytes": self.mean_bytes,
                "alloc_samples": sum(int(c) for c, _ in allocated.values()),
                "allocated_bytes": round(done.allocated_bytes) + unattributed,
                "peak_bytes": round(done.peak_bytes),
                "leaked_bytes": round(sum(w for w, _ in leaked)),
                "memory_views": {"peak": rows(at_peak.values()), "leaked": rows(leaked)},
                "memory_threads": self._per_thread(log, at_peak.values(), leaked),
                "not_seen": not_seen_allocators(),
                "exact_from_bytes": self.mean_bytes,
                "peak_rss_bytes": peak_rss_bytes(),
                "alloc_strata": strata.as_metadata() if strata is not None else None,
                "unattributed_bytes": unattributed,
            }
        )
        if self._info is not None:
            with contextlib.suppress(Exception):  # only informative
                profile.metadata["backend"] = self._info.backend_name
        return profile

    def _strata(self) -> Strata | None:
        """The hooks' exact tallies, when they count exactly the samples delivered here
        (one native session, drained to the end); else None and weights stay as sampled
        (the tracemalloc fallback; a child whose counters were reset after fork)."""
        if self._info is None:
            return None
        try:
            strata = self._info.get_allocation_strata()
        except Exception:  # a collector without it: weights as sampled
            return None
        if strata is None or sum(r.samples for r in strata.rows) != self._delivered:
            return None
        return strata

    def _per_thread(
        self,
        log: list[tuple[Any, ...]],
        at_peak: Iterable[tuple[float, _Key]],
        leaked: Iterable[tuple[float, _Key]],
    ) -> list[dict[str, Any]]:
        """Per allocating thread: bytes allocated, its own peak (the most of its allocations
        alive at once), its share of the process peak, and what it left alive at the end.
        The views' rows are process-wide; this says which thread holds what."""
        rows: dict[int, dict[str, float]] = {}

        def row(thread: int) -> dict[str, float]:
            return rows.setdefault(
                thread, {"allocated": 0.0, "live": 0.0, "peak": 0.0, "at_peak": 0.0, "leaked": 0.0}
            )

        owner: dict[int, tuple[int, float]] = {}
        for entry in log:
            if entry[0] == "a":
                thread, weight = entry[3][0], entry[2]
                r = row(thread)
                r["allocated"] += weight
                r["live"] += weight
                r["peak"] = max(r["peak"], r["live"])
                owner[entry[1]] = (thread, weight)
            elif (found := owner.pop(entry[1], None)) is not None:
                row(found[0])["live"] -= found[1]
        for weight, (thread, _fids) in at_peak:
            row(thread)["at_peak"] += weight
        for weight, (thread, _fids) in leaked:
            row(thread)["leaked"] += weight
        return [
            {
                "thread": thread,
                "name": self._thread_name(thread),
                "allocated_bytes": round(r["allocated"]),
                "peak_bytes": round(r["peak"]),
                "at_process_peak_bytes": round(r["at_peak"]),
                "leaked_bytes": round(r["leaked"]),
            }
            for thread, r in sorted(rows.items())
        ]

    def _thread_name(self, thread: int) -> str:
        return self._thread_ids(thread)[0]

    def _thread_ids(self, thread: int) -> tuple[str, int | None]:
        """A thread's name and OS thread id (``native_id``, what exports show: Chrome tid,
        pprof labels), as the trace and sample modes record them. Allocations may be
        delivered on another thread (the collector's log, drained at detach), so the ids
        are looked up, not read at delivery: a live thread's own, else the collector's
        record of a thread that has ended."""
        for t in threading.enumerate():
            if t.ident == thread:
                return t.name, t.native_id
        try:
            assert self._info is not None
            info = self._info.get_thread_info(ThreadId(thread))
        except Exception:
            return f"Thread-{thread}", None
        return info.name, info.native_id


#: A forked child's parent's allocation logs and live sets (see
#: :meth:`MemoryProfiler.reset_after_fork`): kept, never freed, nothing of them used again.
_put_aside: list[tuple[list[tuple[Any, ...]], set[int]]] = []


#: Extension modules whose big allocations bypass Python's allocators (the hooks memory
#: mode samples), by module name: what a user would otherwise take for "no memory used".
_OWN_ALLOCATORS = {
    "numpy": "numpy array data (numpy allocates it with malloc, outside Python's allocators)",
}


def peak_rss_bytes() -> int | None:
    """The process's peak resident set so far, as the OS counts it (``ru_maxrss``), or None.

    Beside the profile's own peak because they answer different questions: the profile's
    is the bytes Python's allocators held for the program's objects at their highest; the
    OS's includes the interpreter itself, freed-but-kept allocator arenas, and memory no
    hook sees (extension modules' ``malloc``), so a user reads both, each for what it is.
    """
    try:
        import resource
    except ImportError:  # not on every platform
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak) * (1 if sys.platform == "darwin" else 1024)  # Linux counts KiB


def not_seen_allocators() -> list[str]:
    """What this process allocated that memory mode cannot count: loaded extension modules
    known to allocate their data outside Python's allocators (numpy's arrays: a numpy
    program's profile showed 29.6 MiB where tracemalloc saw 327 MB, and said nothing)."""
    return [why for module, why in _OWN_ALLOCATORS.items() if module in sys.modules]


def _scaled(log: list[Any], strata: Strata) -> list[Any]:
    """The log with each allocation's weight scaled to its size class's exact total
    (post-stratification: :meth:`Strata.factors`); frees as they are."""
    factors = strata.factors()
    return [
        (e[0], e[1], e[2] * factors.get(strata.key(e[4]), 1.0), e[3], e[4]) if e[0] == "a" else e
        for e in log
    ]
