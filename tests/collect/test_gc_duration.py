"""GC: garbage_collection_finished_ex carries the collection's duration, beside (not instead
of) the three-argument garbage_collection_finished, which keeps working unchanged."""

from __future__ import annotations

import gc
import time
from typing import Any

from profkit.api import EventMask, ProfilerCallback
from profkit.collect import attach, detach


class Both(ProfilerCallback):
    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def initialize(self, info: Any) -> None:
        info.set_event_mask(EventMask.GC)

    def garbage_collection_started(self, generation: int) -> None:
        time.sleep(0.02)  # the profiler's own time is not the collection's

    def garbage_collection_finished(
        self, generation: int, collected: int, uncollectable: int
    ) -> None:
        self.calls.append(("finished", generation, collected, uncollectable))

    def garbage_collection_finished_ex(
        self, generation: int, collected: int, uncollectable: int, duration_ns: int
    ) -> None:
        self.calls.append(("ex", generation, collected, uncollectable, duration_ns))


class Garbage:
    def __init__(self) -> None:
        self.me = self


def test_duration_is_delivered_after_the_classic_callback() -> None:
    prof = Both()
    attach(prof)
    try:
        for _ in range(1000):
            Garbage()
        before = time.perf_counter_ns()
        gc.collect()
        wall = time.perf_counter_ns() - before
    finally:
        detach()
    full = [i for i, c in enumerate(prof.calls) if c[1] == 2]
    assert full, prof.calls
    classic, ex = prof.calls[full[-2]], prof.calls[full[-1]]
    assert classic[0] == "finished" and ex[0] == "ex"
    assert ex[1:4] == classic[1:4]
    assert 0 < ex[4] <= wall - 20_000_000  # (an order, not a speed: the sleep is outside)


def test_only_the_new_form() -> None:
    class Ex(ProfilerCallback):
        def __init__(self) -> None:
            self.durations: list[int] = []

        def initialize(self, info: Any) -> None:
            info.set_event_mask(EventMask.GC)

        def garbage_collection_finished_ex(self, *args: Any) -> None:
            self.durations.append(args[3])

    prof = Ex()
    attach(prof)
    try:
        gc.collect()
    finally:
        detach()
    assert prof.durations and all(d > 0 for d in prof.durations)
