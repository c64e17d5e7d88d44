"""OBJECT_ALLOCATED through the collector: object_allocated / object_freed with types and
stacks, the heap queries of ProfilerInfo, and the rules (immutable, failures contained)."""

from __future__ import annotations

import gc
from typing import Any

import pytest

from profkit.api import EventMask, ProfilerCallback
from profkit.api.errors import ImmutableFlagError, UnknownIdError
from profkit.collect import attach, detach
from profkit.heap import native_available

pytestmark = pytest.mark.skipif(not native_available(), reason="C hooks not built")


class HeapRecorder(ProfilerCallback):
    def __init__(self, mean: float = 1024) -> None:
        self.mean = mean
        self.allocated: dict[int, tuple[str, int, float, tuple[str, ...]]] = {}
        self.freed: list[int] = []
        self.sizes: dict[int, tuple[int, str]] = {}

    def initialize(self, info: Any) -> None:
        self.info = info
        info.set_allocation_sampling(self.mean)
        info.set_event_mask(EventMask.OBJECT_ALLOCATED)

    def object_allocated(self, object_id, type_name, size, weight, thread_id, function_ids):  # type: ignore[no-untyped-def]
        names = tuple(self.info.get_function_info(f).name for f in function_ids)
        self.allocated[object_id] = (type_name, size, weight, names)
        if size >= 100_000 and "make_buffers" in names:
            self.sizes[object_id] = (
                self.info.get_object_size(object_id),
                self.info.get_class_from_object(object_id),
            )

    def object_freed(self, object_id):  # type: ignore[no-untyped-def]
        self.freed.append(object_id)


class Point:
    def __init__(self, x: int) -> None:
        self.x = x


def make_buffers() -> list[bytearray]:
    return [bytearray(150_000) for _ in range(10)]


def make_points() -> list[Point]:
    return [Point(i) for i in range(20_000)]


def test_allocations_arrive_with_type_size_and_stack() -> None:
    prof = HeapRecorder(mean=4096)
    attach(prof)
    try:
        buffers = make_buffers()
        points = make_points()
        gc.collect()
    finally:
        detach()
    assert len(buffers) == 10 and len(points) == 20_000
    # a bytearray's contents are a separate block (the object itself is 56 bytes)
    big = [v for v in prof.allocated.values() if v[1] > 150_000 and "make_buffers" in v[3]]
    assert len(big) == 10
    assert {v[0] for v in big} == {"(buffer)"}
    points = [v for v in prof.allocated.values() if "make_points" in v[3]]
    assert points and {v[0] for v in points} >= {f"{__name__}.Point"}
    assert sorted(prof.sizes.values()) == [(v[1], "(buffer)") for v in big]


def test_freed_objects_end_their_ids() -> None:
    prof = HeapRecorder(mean=1024)
    attach(prof)
    try:
        gone = make_buffers()
        ids_before = set(prof.allocated)
        del gone
        gc.collect()
    finally:
        detach()
    big = {k for k, v in prof.allocated.items() if v[1] >= 150_000}
    assert big and big <= set(prof.freed) | ids_before | big
    assert big <= set(prof.freed)
    with pytest.raises(Exception):  # noqa: B017 - detached: no heap any more
        prof.info.get_object_size(next(iter(big)))


def test_dead_id_is_unknown_while_attached() -> None:
    prof = HeapRecorder(mean=1024)
    attach(prof)
    try:
        gone = make_buffers()
        del gone
        gc.collect()
        dead = next(k for k, v in prof.allocated.items() if v[1] >= 150_000)
        with pytest.raises(UnknownIdError):
            prof.info.get_object_size(dead)
    finally:
        detach()


def test_object_allocated_is_immutable_and_sampling_set_in_initialize_only() -> None:
    class Late(ProfilerCallback):
        def initialize(self, info: Any) -> None:
            self.info = info
            info.set_event_mask(EventMask.ENTER_LEAVE)

    prof = Late()
    attach(prof)
    try:
        with pytest.raises(ImmutableFlagError):
            prof.info.set_event_mask(EventMask.ENTER_LEAVE | EventMask.OBJECT_ALLOCATED)
        with pytest.raises(ImmutableFlagError):
            prof.info.set_allocation_sampling(4096)
    finally:
        detach()


def test_a_failing_callback_is_contained(capsys: pytest.CaptureFixture[str]) -> None:
    class Broken(HeapRecorder):
        def object_allocated(self, *args: Any) -> None:
            raise ValueError("profiler bug")

    attach(Broken(mean=1024))
    try:
        kept = make_buffers()  # the program goes on
        gc.collect()
        kept += make_buffers()
        gc.collect()
    finally:
        detach()
    assert len(kept) == 20
    err = capsys.readouterr().err
    assert err.count("profiler bug") == 1, err


class Counting(HeapRecorder):
    def object_allocated(self, object_id, type_name, size, weight, thread_id, function_ids):  # type: ignore[no-untyped-def]
        self.allocated[object_id] = (type_name, size, weight, ())


def test_young_collections_leave_the_log_to_batches_and_gc_collect_delivers() -> None:
    # A drain after every young collection was most of memory mode's cost on small-object
    # churn; the frees of a gc.collect() still arrive before it returns.
    from profkit.heap.sampler import _heaphook

    prof = Counting(mean=100_000)
    attach(prof)
    try:
        buffers = make_buffers()  # 150 KB blocks, each recorded (above the mean)
        gc.collect(0)
        waiting = _heaphook.pending()
        del buffers
        gc.collect()
        left = _heaphook.pending()
    finally:
        detach()
    assert waiting > 0  # a young collection did not drain the log
    assert left == 0  # a full one did
