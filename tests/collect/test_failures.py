"""Regression tests found by running real programs under failing or unusual profilers.

Each test names the discrepancy it pins down. Anything that could hang on a regression
runs in a helper thread or child process with a generous bound, so a bug fails the test
instead of stalling the suite (the bounds are never asserted as timings).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from typing import Any

import pytest

from profkit.api import EventMask, ProfilerCallback
from profkit.collect import attach, current_session, detach
from tests.collect.children import wait_or_kill

HANG = 20.0  #: seconds after which a blocked operation counts as a deadlock


class FailsWhileDetaching(ProfilerCallback):
    """Its ``stack_sample`` raises only once the session is being detached."""

    def initialize(self, info: Any) -> None:
        self.info = info
        self.sampling = threading.Event()
        info.set_event_mask(EventMask.SAMPLING)

    def stack_sample(
        self, thread_id: Any, function_ids: Any, timestamp_ns: int, weight_ns: int
    ) -> None:
        self.sampling.set()
        deadline = time.monotonic() + HANG
        while current_session() is not None and time.monotonic() < deadline:
            time.sleep(0.001)
        raise ValueError("late failure")


def test_sampler_failing_during_detach_does_not_deadlock(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """detach() joined the sampler while holding the session lock, and the sampler's
    failure report waited for that lock: a profiler raising in stack_sample at exit
    hung the program forever (found with a program run under a raising profiler)."""
    profiler = FailsWhileDetaching()
    attach(profiler, "sampler", sample_interval=0.001)
    assert profiler.sampling.wait(HANG)
    worker = threading.Thread(target=detach, daemon=True)
    worker.start()
    worker.join(HANG)
    assert not worker.is_alive(), "detach() deadlocked with the failing sampler"
    err = capsys.readouterr().err
    assert err.count("profkit: profiler") <= 1


class Counting(ProfilerCallback):
    """Enter/leave counter without locks of its own."""

    def initialize(self, info: Any) -> None:
        self.calls = 0
        info.set_event_mask(EventMask.ENTER_LEAVE)

    def function_enter(self, function_id: Any) -> None:
        self.calls += 1

    def function_leave(self, function_id: Any) -> None:
        self.calls -= 1


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # 3.12+: fork with threads
def test_fork_while_another_thread_holds_profkit_locks(backend: str) -> None:
    """A forked child hung when another thread of the parent held one of profkit's locks
    at fork(): the child's after-fork handler waited for the session lock (and, before the
    id tables became lock-free, its first function discovery for the table's lock; seen
    as a rare hang of a ProcessPoolExecutor program under profiling)."""
    import profkit.collect as collect

    attached = attach(Counting(), backend)
    session: Any = attached.info
    locks = [collect._lock, session._lock]
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        for lock in locks:
            lock.acquire()
        held.set()
        release.wait(HANG)
        for lock in reversed(locks):
            lock.release()

    holder = threading.Thread(target=hold, daemon=True)
    holder.start()
    assert held.wait(HANG)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:

            def born_in_child(n: int) -> int:
                return n + 1

            code = 0 if born_in_child(1) == 2 and current_session() is None else 3
        finally:
            os._exit(code)
    release.set()
    holder.join(HANG)
    assert wait_or_kill(pid, HANG) == 0


def _recurse(n: int) -> int:
    return _recurse(n + 1)


def test_recursion_error_carries_no_profkit_frame(backend: str) -> None:
    """At the recursion limit the monitoring callbacks' own ``fail(...)`` call overflowed
    again, so the program's RecursionError came out of profkit's callback, with a profkit
    frame at the bottom of the program's traceback."""
    import traceback

    attach(Counting(), backend)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(200, len(traceback.extract_stack()) + 100))
    try:
        with pytest.raises(RecursionError) as caught:
            _recurse(0)
    finally:
        sys.setrecursionlimit(limit)
    detach()
    files = {entry.filename for entry in traceback.extract_tb(caught.value.__traceback__)}
    assert not [f for f in files if "/profkit/collect/" in f]
    assert caught.value.__context__ is None


class BusyEnter(ProfilerCallback):
    """Spends its time inside function_enter, where a signal handler is likely to run."""

    def initialize(self, info: Any) -> None:
        info.set_event_mask(EventMask.ENTER_LEAVE)

    def function_enter(self, function_id: Any) -> None:
        for _ in range(200):
            pass


def _tiny() -> int:
    return 1


class Alarm(Exception):
    pass


def _raise_alarm(signum: int, frame: Any) -> None:
    raise Alarm()


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="needs setitimer")
def test_exception_from_signal_handler_reaches_the_program(
    backend: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A signal handler runs wherever the main thread is, often inside a callback; the
    exception it raised was taken for a profiler failure: reported, profiler detached,
    and the program never saw it (a loop waiting for its alarm ran forever)."""
    previous = signal.signal(signal.SIGALRM, _raise_alarm)
    attach(BusyEnter(), backend)
    got = False
    deadline = time.monotonic() + HANG
    try:
        try:
            signal.setitimer(signal.ITIMER_REAL, 0.001)
            while time.monotonic() < deadline:
                _tiny()
        except Alarm:
            got = True
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        session = current_session()
        detach()
    assert got
    assert session is not None, "the program's exception detached the profiler"
    assert "profkit: profiler" not in capsys.readouterr().err


class AsksCurrentThread(ProfilerCallback):
    """Calls threading.current_thread() on every event, as a profiler naming stacks does."""

    def initialize(self, info: Any) -> None:
        self.kinds: set[str] = set()
        info.set_event_mask(EventMask.ENTER_LEAVE | EventMask.THREADS)

    def _look(self) -> None:
        self.kinds.add(type(threading.current_thread()).__name__)

    def function_enter(self, function_id: Any) -> None:
        self._look()

    def thread_created(self, thread_id: Any) -> None:
        self._look()


def test_current_thread_is_the_real_thread_in_callbacks(backend: str) -> None:
    """A new thread's first notifications (thread_created, and the traced code of
    Thread._bootstrap_inner before it registers the thread) saw a _DummyThread from
    threading.current_thread(); 3.13 then printed "Exception ignored in:
    _DeleteDummyThreadOnDel.__del__" at exit (found with profkit run on 3.13)."""
    profiler = AsksCurrentThread()
    attach(profiler, backend)
    worker = threading.Thread(target=_tiny)
    worker.start()
    worker.join()
    detach()
    assert "_DummyThread" not in profiler.kinds
