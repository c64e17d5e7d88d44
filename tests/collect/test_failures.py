"""Regression tests found by running real programs under failing or unusual profilers.

Each test names the discrepancy it pins down. Anything that could hang on a regression
runs in a helper thread or child process with a generous bound, so a bug fails the test
instead of stalling the suite (the bounds are never asserted as timings).
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from profkit.api import EventMask, ProfilerCallback
from profkit.collect import attach, current_session, detach

HANG = 20.0  #: seconds after which a blocked operation counts as a deadlock


class FailsWhileDetaching(ProfilerCallback):
    """Its ``stack_sample`` raises only once the session is being detached."""

    def initialize(self, info: Any) -> None:
        self.info = info
        self.sampling = threading.Event()
        info.set_event_mask(EventMask.SAMPLING)

    def stack_sample(self, thread_id: Any, function_ids: Any, timestamp_ns: int, weight_ns: int) -> None:
        self.sampling.set()
        deadline = time.monotonic() + HANG
        while current_session() is not None and time.monotonic() < deadline:
            time.sleep(0.001)
        raise ValueError("late failure")


def test_sampler_failing_during_detach_does_not_deadlock(capsys: pytest.CaptureFixture[str]) -> None:
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
