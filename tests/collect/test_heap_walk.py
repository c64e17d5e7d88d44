"""info.walk_heap() through the collector: called from a GC callback it delivers the heap
graph (object_references, then root_references once), the walk's own allocations are not
sampled, and a profiler failing inside the walk is contained."""

from __future__ import annotations

import gc
import sys
from typing import Any

import pytest

from profkit.api import EventMask, ProfilerCallback
from profkit.collect import attach, detach
from profkit.heap import native_available
from profkit.heap.walk import MODULE


class Leak:
    """What the module global below holds on to."""


LEAKED: list[Leak] = []


class Walker(ProfilerCallback):
    """Walks the heap after the first full collection, from inside the GC callback."""

    def __init__(self, mask: EventMask = EventMask.GC) -> None:
        self.mask = mask
        self.objects: dict[int, tuple[str, int, tuple[int, ...]]] = {}
        self.roots: dict[int, str] = {}
        self.walks = 0
        self.allocated_during_walk = 0
        self._walking = False

    def initialize(self, info: Any) -> None:
        self.info = info
        if self.mask & EventMask.OBJECT_ALLOCATED:
            info.set_allocation_sampling(256)
        info.set_event_mask(self.mask)

    def garbage_collection_finished(
        self, generation: int, collected: int, uncollectable: int
    ) -> None:
        if generation == 2 and not self.walks:
            self.walks += 1
            self._walking = True
            try:
                self.info.walk_heap()
            finally:
                self._walking = False

    def object_references(
        self, object_id: int, type_name: str, size: int, referenced_ids: tuple[int, ...]
    ) -> None:
        self.objects[object_id] = (type_name, size, referenced_ids)

    def root_references(self, root_ids: tuple[int, ...], kinds: tuple[str, ...]) -> None:
        self.roots.update(zip(root_ids, kinds, strict=True))

    def object_allocated(self, *args: Any) -> None:
        if self._walking:
            self.allocated_during_walk += 1


def test_walk_from_a_gc_callback_sees_the_module_global_leak() -> None:
    LEAKED[:] = [Leak() for _ in range(50)]
    prof = Walker()
    attach(prof)
    try:
        gc.collect()
    finally:
        detach()
    try:
        assert prof.walks == 1
        module = sys.modules[__name__]
        assert prof.roots[id(module)] == MODULE
        names = {t for t, _, _ in prof.objects.values()}
        assert f"{__name__}.Leak" in names
        _, _, refs = prof.objects[id(LEAKED)]
        assert sorted(refs) == sorted(id(x) for x in LEAKED)
        # the module refers to its dict, and the dict to the list
        (dict_id,) = [r for r in prof.objects[id(module)][2] if r == id(vars(module))]
        assert id(LEAKED) in prof.objects[dict_id][2]
        assert gc.isenabled()
    finally:
        LEAKED.clear()


def test_a_profiler_without_the_callbacks_costs_nothing() -> None:
    class Quiet(ProfilerCallback):
        def initialize(self, info: Any) -> None:
            self.info = info

    prof = Quiet()
    attach(prof)
    try:
        prof.info.walk_heap()  # returns at once: nobody listens
    finally:
        detach()


@pytest.mark.skipif(not native_available(), reason="C hooks not built")
def test_the_walks_allocations_are_not_sampled() -> None:
    prof = Walker(EventMask.GC | EventMask.OBJECT_ALLOCATED)
    attach(prof)
    try:
        gc.collect()
        kept = [bytearray(10_000) for _ in range(10)]  # sampling goes on afterwards
        gc.collect()
    finally:
        detach()
    assert prof.walks == 1 and prof.objects
    assert prof.allocated_during_walk == 0
    assert len(kept) == 10


def test_a_failure_inside_the_walk_is_contained(capsys: pytest.CaptureFixture[str]) -> None:
    class Broken(Walker):
        def object_references(self, *args: Any) -> None:
            raise ValueError("profiler bug")

    prof = Broken()
    attach(prof)
    try:
        gc.collect()
        gc.collect()
    finally:
        detach()
    err = capsys.readouterr().err
    assert err.count("profiler bug") == 1, err
    assert "walk_heap" in err
    assert gc.isenabled()


def test_the_graph_of_info_walk_heap_gets_named_chains() -> None:
    """Issue 24, item 3, on ``info.walk_heap()``: the graph a profiler records through its
    callbacks, given to ``why_alive``, names the module variable holding the objects."""
    from profkit.heap.why_alive import HeapSnapshot, chains_to, named

    LEAKED[:] = [Leak() for _ in range(5)]
    prof = Walker()
    attach(prof)
    try:
        gc.collect()
    finally:
        detach()
    try:
        snapshot = HeapSnapshot(objects=prof.objects, roots=prof.roots)
        target = id(LEAKED[3])
        chain = named(chains_to(snapshot, [target]), snapshot)[target]
        assert str(chain) == f"[module] {__name__}.LEAKED -> list[3] -> {__name__}.Leak"
    finally:
        LEAKED.clear()
