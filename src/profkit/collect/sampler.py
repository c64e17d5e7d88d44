"""The sampling collector: a thread that reads every thread's stack at an interval.

``sys._current_frames()`` gives each thread's innermost frame; the sampler walks
``f_back`` and delivers ``stack_sample(thread_id, function_ids, timestamp_ns, weight_ns)``
on its own thread. ``weight_ns`` is the time the sample stands for:

* ``wall``: the wall time since that thread's previous sample;
* ``cpu``: the thread's own CPU time since its previous sample, read with
  ``time.pthread_getcpuclockid(ident)`` + ``time.clock_gettime_ns`` (Linux/BSD; the
  ident of a ``threading`` thread is its ``pthread_t``). A thread that used no CPU since
  its last sample (blocked, sleeping) gets no sample. Where per-thread clocks are missing,
  the process CPU time since the previous tick is split evenly across the sampled threads.

The clocks are bound at import (coverage's ``isolate_module``), so a test that freezes
``time`` cannot stall the sampler.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable

from profkit.api.events import EventMask
from profkit.api.ids import FunctionId, ThreadId
from profkit.collect.base import Capabilities
from profkit.collect.context import BackendContext
from profkit.collect.select import TRACING_BITS

_monotonic_ns = time.monotonic_ns
_process_time_ns = time.process_time_ns
_sleep = time.sleep
_current_frames = sys._current_frames
_getcpuclockid: Callable[[int], int] | None = getattr(time, "pthread_getcpuclockid", None)
_clock_gettime_ns: Callable[[int], int] | None = getattr(time, "clock_gettime_ns", None)

CAPABILITIES = Capabilities(
    events=EventMask(~int(TRACING_BITS) & 0xFFFF)
    & (
        EventMask.SAMPLING
        | EventMask.THREADS
        | EventMask.MODULE_LOADS
        | EventMask.GC
        | EventMask.ENABLE_STACK_SNAPSHOT
    ),
    cheap_filter=True,
    all_threads=True,
    full_exceptions=False,
)


class NullBackend:
    """The tracing slot when only sampling is selected: no interpreter hook at all."""

    name = "sampler"
    capabilities = CAPABILITIES

    def start(self) -> None:
        """Nothing to install."""

    def stop(self) -> None:
        """Nothing to remove."""

    def abandon(self) -> None:
        """In a forked child: as :meth:`stop` (nothing of the parent's is torn down)."""
        self.stop()

    #: only ever beside the sampler, whose thread a forked child lacks: a new session
    resumes_after_fork = False

    def resume_after_fork(self) -> None:
        """Never called (:attr:`resumes_after_fork` is False)."""

    def rearm(self) -> None:
        """Nothing to re-read."""


def thread_cpu_ns(ident: int) -> int | None:
    """CPU time used by thread ``ident`` so far, or None where that cannot be read."""
    if _getcpuclockid is None or _clock_gettime_ns is None:
        return None
    try:
        return _clock_gettime_ns(_getcpuclockid(ident))
    except (OSError, OverflowError, ValueError):
        return None


class Sampler:
    """The sampler thread; runs beside any backend when ``SAMPLING`` is in the mask."""

    name = "sampler"
    capabilities = CAPABILITIES

    def __init__(self, ctx: BackendContext) -> None:
        self.ctx = ctx
        self.interval = ctx.sample_interval
        self.cpu = ctx.sample_clock == "cpu"
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.samples = 0  #: samples delivered (for tests and the bench)
        self._last: dict[int, int] = {}  #: thread → its clock at its previous sample
        self._internal: dict[int, bool] = {}  #: thread → is it one of profkit's own
        self._last_tick = 0
        self._last_proc = 0

    def start(self) -> None:
        """Start the sampler thread (a daemon: it never keeps the process alive)."""
        if self.ctx.plan.mask & EventMask.SAMPLING and self._thread is None:
            self._stop.clear()
            thread = threading.Thread(target=self._run, name="profkit-sampler", daemon=True)
            thread.profkit_internal = True  # type: ignore[attr-defined]
            self._thread = thread
            thread.start()

    def stop(self) -> None:
        """Stop and join the thread (unless called from the sampler thread itself).

        A thread that is not alive is left alone, which matters in a forked child: the
        sampler thread was the parent's, and its stop event's lock may have been held
        by that thread at ``fork()``.
        """
        thread, self._thread = self._thread, None
        if thread is None or not thread.is_alive():
            return
        self._stop.set()
        if thread is not threading.current_thread():
            thread.join()

    def abandon(self) -> None:
        """In a forked child: as :meth:`stop` (nothing of the parent's is torn down)."""
        self.stop()

    #: its thread does not exist in a forked child: a new session is made there
    resumes_after_fork = False

    def resume_after_fork(self) -> None:
        """Never called (:attr:`resumes_after_fork` is False)."""

    def rearm(self) -> None:
        """SAMPLING is immutable, so nothing changes."""

    def _run(self) -> None:
        sys.setprofile(None)  # the setprofile backend must not trace the sampler itself
        stack_sample = self.ctx.method("stack_sample")
        fail = self.ctx.fail
        stop = self._stop
        interval = self.interval
        self._last = {}
        self._last_tick = _monotonic_ns()
        self._last_proc = _process_time_ns()
        me = threading.get_ident()
        while not stop.wait(interval):
            now, samples = self._tick(me)
            for ident, stack, weight in samples:
                try:
                    stack_sample(ThreadId(ident), stack, now, weight)
                except BaseException as exc:
                    fail(exc, "stack_sample")
                    return
                self.samples += 1

    def _classify_threads(self) -> None:
        """Note which threads are profkit's own (a true ``profkit_internal`` attribute)."""
        internal = self._internal
        for thread in threading.enumerate():
            if thread.ident is not None:
                internal[thread.ident] = bool(getattr(thread, "profkit_internal", False))
        if len(internal) > 1024:  # idents of ended threads
            alive = {t.ident for t in threading.enumerate()}
            for ident in [i for i in internal if i not in alive]:
                del internal[ident]

    def _tick(self, me: int) -> tuple[int, list[tuple[int, tuple[FunctionId, ...], int]]]:
        """Read every thread's stack once. A method of its own so that no frame stays
        referenced while the sampler sleeps (that would keep a frame's locals alive)."""
        frames_to_ids = self.ctx.frames_to_ids
        last = self._last
        now = _monotonic_ns()
        proc = _process_time_ns()
        frames = _current_frames()
        frames.pop(me, None)
        internal = self._internal
        if any(ident not in internal for ident in frames):
            self._classify_threads()
        for ident in [i for i in frames if internal.get(i)]:
            del frames[ident]  # profkit's own threads (profkit_internal) are not sampled
        share = (proc - self._last_proc) // max(1, len(frames))
        interval_ns = int(self.interval * 1e9)
        samples: list[tuple[int, tuple[FunctionId, ...], int]] = []
        for ident, frame in frames.items():
            if self.cpu:
                used = thread_cpu_ns(ident)
                if used is None:
                    weight = share
                else:
                    previous = last.get(ident)
                    weight = min(used, interval_ns) if previous is None else used - previous
                    last[ident] = used
                if weight <= 0:
                    continue
            else:
                weight = now - last.get(ident, self._last_tick)
                last[ident] = now
            samples.append((ident, frames_to_ids(frame, accepted_only=True), weight))
        self._last_tick, self._last_proc = now, proc
        if len(last) > 4 * len(frames) + 64:  # forget threads that ended
            for ident in [i for i in last if i not in frames]:
                del last[ident]
        return now, samples
