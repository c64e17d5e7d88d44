"""The api contract: mask bits, immutability, ids and their lifetimes, info lookups."""

from __future__ import annotations

import gc
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from profkit.api import (
    IMMUTABLE,
    EventMask,
    FunctionInfo,
    ImmutableFlagError,
    ProfilerCallback,
    UnknownIdError,
    UnsupportedEventError,
)
from profkit.collect import attach, detach
from profkit.collect.plan import make_plan
from profkit.collect.select import choose, unavailable

BITS = [b for b in EventMask if b.value and (b.value & (b.value - 1)) == 0]


@pytest.fixture(autouse=True)
def _detach() -> object:
    yield
    detach()


def test_immutable_bits() -> None:
    assert IMMUTABLE == (
        EventMask.CODE_TRANSITIONS
        | EventMask.FUNCTION_ARGS
        | EventMask.FUNCTION_RETVAL
        | EventMask.SAMPLING
        | EventMask.OBJECT_ALLOCATED  # as the CLR's: the allocator is hooked from the start
    )
    assert not EventMask.ENTER_LEAVE & IMMUTABLE


def test_callback_defaults_are_no_ops() -> None:
    cb = ProfilerCallback()
    cb.function_enter(1)  # type: ignore[arg-type]
    cb.stack_sample(1, (), 0, 0)  # type: ignore[arg-type]
    cb.garbage_collection_finished(0, 0, 0)
    assert make_plan(cb, EventMask.ALL_TRACING).tracks_calls is False


def test_plan_binds_only_overridden_and_selected() -> None:
    class P(ProfilerCallback):
        def function_enter(self, function_id):  # type: ignore[no-untyped-def]
            pass

    plan = make_plan(P(), EventMask.ENTER_LEAVE)
    assert plan.enter is not None and plan.leave is None and plan.thrown is None
    assert make_plan(P(), EventMask.GC).enter is None


def test_function_info_full_name() -> None:
    info = FunctionInfo(1, "C.m", "pkg.mod", "/x.py", 3, False, False)  # type: ignore[arg-type]
    assert info.full_name == "pkg.mod.C.m"
    assert FunctionInfo(1, "len", "", "", 0, True, False).full_name == "len"  # type: ignore[arg-type]


class MaskSetter(ProfilerCallback):
    def __init__(self, initial: EventMask) -> None:
        self.initial = initial

    def initialize(self, info):  # type: ignore[no-untyped-def]
        self.info = info
        info.set_event_mask(self.initial)


@settings(max_examples=25, deadline=None)
@given(st.sets(st.sampled_from(BITS)), st.sets(st.sampled_from(BITS)))
def test_set_event_mask_after_initialize(first: set[EventMask], second: set[EventMask]) -> None:
    tracing = next(b for b in ("monitoring", "setprofile") if unavailable(b) is None)
    initial = EventMask(sum(int(b) for b in first)) & ~EventMask.SAMPLING
    later = EventMask(sum(int(b) for b in second)) & ~EventMask.SAMPLING
    prof = MaskSetter(initial)
    attach(prof, tracing)
    try:
        if (initial ^ later) & IMMUTABLE:
            with pytest.raises(ImmutableFlagError):
                prof.info.set_event_mask(later)
            assert prof.info.get_event_mask() == initial
        else:
            prof.info.set_event_mask(later)
            assert prof.info.get_event_mask() == later
    finally:
        detach()


def test_sampler_backend_refuses_tracing_bits() -> None:
    with pytest.raises(UnsupportedEventError):
        choose("sampler", EventMask.ENTER_LEAVE)
    assert choose("auto", EventMask.SAMPLING).name == "sampler"
    assert choose("auto", EventMask.ENTER_LEAVE | EventMask.SAMPLING).name != "sampler"


def make_function():  # type: ignore[no-untyped-def]
    namespace: dict[str, object] = {}
    exec("def dynamic():\n    return 1\n", namespace)
    return namespace["dynamic"]


def test_function_ids_stable_and_never_reused() -> None:
    class Ids(ProfilerCallback):
        def initialize(self, info):  # type: ignore[no-untyped-def]
            self.info = info
            self.seen: list[int] = []
            info.set_event_mask(EventMask.ENTER_LEAVE | EventMask.FIRST_EXECUTION)

        def function_first_execution(self, function_id):  # type: ignore[no-untyped-def]
            self.seen.append(function_id)

    prof = Ids()
    attach(prof)
    for _ in range(20):  # code objects that die right after their one call
        make_function()()
        gc.collect()
    detach()
    dynamic = [f for f in prof.seen if prof.info.get_function_info(f).name == "dynamic"]
    assert len(dynamic) == len(set(dynamic)) == 20  # 20 code objects, 20 distinct ids
    with pytest.raises(UnknownIdError):
        prof.info.get_function_info(12345)
    with pytest.raises(UnknownIdError):
        prof.info.get_module_info(10**9)


def test_thread_info() -> None:
    prof = MaskSetter(EventMask.THREADS)
    attach(prof)
    t = threading.Thread(target=lambda: None, name="named-one")
    t.start()
    t.join()
    info = prof.info.get_thread_info(t.ident)
    assert info.name == "named-one" and not info.is_alive and info.native_id == t.native_id
    me = prof.info.get_current_thread_id()
    assert me == threading.get_ident()
    assert me in list(prof.info.iter_threads())
    assert prof.info.get_thread_info(me).is_alive
    detach()


def test_plan_binds_the_call_events_a_profiler_hands_over() -> None:
    """``call_events`` names callables for some call notifications; the rest fall back
    to the profiler's methods, and the mask still decides what is delivered."""
    from profkit.api import CallEvents

    def enter(function_id):  # type: ignore[no-untyped-def]
        pass

    class P(ProfilerCallback):
        def function_leave(self, function_id):  # type: ignore[no-untyped-def]
            pass

        def call_events(self) -> CallEvents:
            return CallEvents(function_enter=enter, python_to_native_transition=enter)

    plan = make_plan(P(), EventMask.ENTER_LEAVE)
    assert plan.enter is enter and plan.leave is not None and plan.resume is None
    assert plan.to_native is None  # CODE_TRANSITIONS not selected
    assert make_plan(P(), EventMask.CODE_TRANSITIONS).to_native is enter
