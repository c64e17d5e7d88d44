"""The C recorder under hostile timing: its Python callbacks run arbitrary code.

``new_thread``, a Python clock and ``on_error`` (and, on 3.11, any allocation, through the
garbage collector's finalizers) can switch threads, call back into the same recorder, or
drop the last reference to it. None of that may crash or corrupt the profiled program:
each test here once did (or would have, under AddressSanitizer) before the C recorder
stopped keeping frame pointers, node counts and borrowed references across such calls.
The checks are structural (no timings): well-formed exports and exact call counts.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from profkit.profilers.elt import native

pytestmark = pytest.mark.skipif(not native.available(), reason="the C recorder is not built")

Rows = list[tuple[int, int, int, int, int, int]]


@pytest.fixture(autouse=True)
def hot_path() -> str:
    """These tests use the C recorder directly (overrides the conftest's both-ways run)."""
    return "native"


def _new(new_thread: Callable[[], object], **kwargs: Any) -> Any:
    assert native.Recorder is not None
    return native.Recorder(new_thread, **kwargs)


def _well_formed(exported: list[tuple[Any, Rows]]) -> None:
    for _, rows in exported:
        assert rows[0][0] == -1
        for index, (parent, _fid, calls, _incl, _lo, _hi) in enumerate(rows[1:], 1):
            assert 0 <= parent < index and calls >= 0
        native.tree_of(rows)


def test_export_inside_the_clock_then_a_failing_clock_keeps_the_stack_sound() -> None:
    """Was a segfault: the pushed frame was popped after export had emptied the stack."""
    ticks = [0]

    def clock() -> int:
        ticks[0] += 1
        if ticks[0] == 2:
            rec.export(0)
            raise ValueError("clock broke")
        return ticks[0]

    rec = _new(lambda: "t", clock=clock)
    rec.enter(1)
    with pytest.raises(ValueError):
        rec.enter(2)
    for fid in range(3, 300):  # enough pushes to use (and grow) the frame array
        rec.enter(fid)
    for fid in reversed(range(3, 300)):
        rec.leave(fid)
    closed, exported = rec.export(10**6)
    assert closed == 0
    _well_formed(exported)
    ((_, rows),) = exported
    root = native.tree_of(rows)
    node = root.children[3]  # entered on the stack export had emptied
    assert node.calls == 1 and 4 in node.children


def test_events_inside_the_clock_cannot_leave_a_dangling_frame() -> None:
    """A nested enter from the clock grows (reallocates) the frame array mid-event."""
    nested = [True]

    def clock() -> int:
        if nested[0]:
            nested[0] = False
            for fid in range(1000, 1200):
                rec.enter(fid)
            for fid in reversed(range(1000, 1200)):
                rec.leave(fid)
            nested[0] = True
        return 5

    rec = _new(lambda: "t", clock=clock)
    rec.enter(1)
    rec.leave(1)
    closed, exported = rec.export(5)
    assert closed == 0
    _well_formed(exported)
    ((_, rows),) = exported
    assert native.tree_of(rows).children[1].calls == 1


def test_collections_recording_during_export_cannot_overrun_it() -> None:
    """3.11 collects inside allocations, and a collection runs Python code (finalizers,
    gc.callbacks): that code added nodes to the tree export was walking."""
    rec = _new(lambda: "t")
    chain = range(1, 51)
    for fid in chain:
        rec.enter(fid)
    for fid in reversed(chain):
        rec.leave(fid)
    collections: list[int] = []

    def during_collection(phase: str, info: dict[str, int]) -> None:
        collections.append(1)
        if phase == "start" and len(collections) == 3:  # in the middle of the walk
            for fid in chain:
                rec.enter(fid)
            for fid in range(10_000, 12_000):  # new children of the last node walked
                rec.enter(fid)
                rec.leave(fid)
            for fid in reversed(chain):
                rec.leave(fid)

    threshold = gc.get_threshold()
    gc.collect()
    gc.callbacks.append(during_collection)
    try:
        gc.set_threshold(1)
        _, exported = rec.export(0)
    finally:
        gc.set_threshold(*threshold)
        gc.callbacks.remove(during_collection)
    _well_formed(exported)
    if len(collections) < 3:  # 3.12+ collect between bytecodes, not inside export
        during_collection("start", {})
    _, ((_, rows),) = rec.export(0)
    node = native.tree_of(rows)
    for _ in chain:
        (node,) = node.children.values()
    assert len(node.children) == 2000


def test_a_nested_event_inside_new_thread_gives_the_thread_one_tree() -> None:
    asked: list[int] = []

    def new_thread() -> object:
        asked.append(1)
        if len(asked) == 1:
            rec.enter(99)  # asks again, inside: that answer stands
        return f"answer{len(asked)}"

    rec = _new(new_thread)
    rec.enter(1)
    rec.leave(1)
    rec.leave(99)
    _, exported = rec.export(0)
    ((token, rows),) = exported
    assert token == "answer2"
    children = native.tree_of(rows).children
    assert children[99].calls == 1 and children[99].children[1].calls == 1


def test_quiet_this_thread_inside_new_thread_stands() -> None:
    def new_thread() -> object:
        rec.quiet_this_thread()
        return "t"

    rec = _new(new_thread)
    rec.enter(1)
    rec.leave(1)
    assert rec.export(0) == (0, [])


def test_threads_switching_inside_a_python_clock_keep_their_own_stacks() -> None:
    """A clock that releases the GIL mid-event: every thread's counts come out exact."""

    def clock() -> int:
        time.sleep(0)  # lets another thread run in the middle of this event
        return time.perf_counter_ns()

    rec = _new(lambda: threading.current_thread().name, clock=clock)
    rounds, width = 30, 4

    def work(base: int) -> None:
        for _ in range(rounds):
            for fid in range(base, base + width):
                rec.enter(fid)
            for fid in reversed(range(base, base + width)):
                rec.leave(fid)

    threads = [threading.Thread(target=work, args=(i * 10,), name=f"W{i}") for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    closed, exported = rec.export(time.perf_counter_ns())
    assert closed == 0
    assert sorted(token for token, _ in exported) == sorted(t.name for t in threads)
    for token, rows in exported:
        base = int(token[1:]) * 10
        node = native.tree_of(rows)
        for fid in range(base, base + width):
            (node,) = node.children.values()
            assert node.fid == fid and node.calls == rounds


def test_exports_from_another_thread_while_events_run() -> None:
    failures: list[int] = []

    def clock() -> int:
        time.sleep(0)
        if len(failures) < 50 and time.perf_counter_ns() % 7 == 0:
            failures.append(1)
            raise ValueError("a flaky clock")
        return time.perf_counter_ns()

    rec = _new(lambda: threading.current_thread().name, clock=clock)
    stop = threading.Event()

    def work(base: int) -> None:
        while not stop.is_set():
            for fid in range(base, base + 5):
                with contextlib.suppress(ValueError):  # the flaky clock's
                    rec.enter(fid)
            for fid in reversed(range(base, base + 5)):
                with contextlib.suppress(ValueError):
                    rec.leave(fid)

    threads = [threading.Thread(target=work, args=(i * 10,)) for i in range(4)]
    for t in threads:
        t.start()
    try:
        for _ in range(40):
            _, exported = rec.export(time.perf_counter_ns())
            _well_formed(exported)
    finally:
        stop.set()
        for t in threads:
            t.join()
    _, exported = rec.export(time.perf_counter_ns())
    _well_formed(exported)


def test_recorders_dying_while_threads_cache_them_are_never_matched_again() -> None:
    """Serials are never reused: a thread's cached dead recorder is not a new one's."""
    go, done = threading.Event(), threading.Event()
    current: list[Any] = []

    def worker() -> None:
        for _ in range(20):
            go.wait()
            go.clear()
            current[0].enter(1)
            current[0].leave(1)
            done.set()

    t = threading.Thread(target=worker)
    t.start()
    try:
        for i in range(20):
            current[:] = [_new(f"rec{i}".__str__)]
            go.set()
            assert done.wait(10)
            done.clear()
            _, ((token, rows),) = current[0].export(0)
            assert token == f"rec{i}" and native.tree_of(rows).children[1].calls == 1
            current.clear()
            gc.collect()
    finally:
        go.set()
        t.join()


def test_a_token_referring_to_its_recorder_is_collected() -> None:
    marker = object()
    base = sys.getrefcount(marker)
    box: list[Any] = []
    rec = _new(lambda: (marker, box[0]))
    box.append(rec)
    rec.enter(1)
    box.clear()
    assert sys.getrefcount(marker) == base + 1  # the token
    del rec
    gc.collect()
    assert sys.getrefcount(marker) == base  # the cycle through the token was broken


def test_other_keys_in_the_thread_state_dict_are_never_taken_for_ours() -> None:
    """The thread-state dict is shared by every extension: small int keys are common."""
    get_dict = ctypes.pythonapi.PyThreadState_GetDict
    get_dict.restype = ctypes.py_object
    shared = get_dict()  # a borrowed reference, which ctypes takes as its own:
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(shared))  # give it one to drop
    planted = {k: 0xDEAD0 + k for k in range(1, 5000) if k not in shared}
    shared.update(planted)
    try:
        rec = _new(lambda: "t")
        rec.enter(1)
        rec.leave(1)
        _, ((_, rows),) = rec.export(0)
        assert native.tree_of(rows).children[1].calls == 1
        assert all(shared[k] == v for k, v in planted.items())
    finally:
        for k in planted:
            shared.pop(k, None)


def test_extreme_clock_values_wrap_instead_of_overflowing() -> None:
    """Signed overflow is undefined behaviour in C: differences wrap (UBSan checks it)."""
    values = iter([-(2**63), 2**63 - 1, 2**63 - 1, -(2**63), 2**63 - 1])
    rec = _new(lambda: "t", clock=lambda: next(values))
    rec.enter(1)
    rec.leave(1)
    rec.enter(2)
    rec.leave(2)
    rec.enter(3)
    closed, exported = rec.export(-(2**63))
    assert closed == 1
    _well_formed(exported)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
@pytest.mark.filterwarnings("ignore:.*fork.*:DeprecationWarning")  # 3.12+: threads alive
def test_the_child_of_a_fork_keeps_recording() -> None:
    rec = _new(lambda: threading.current_thread().name)
    t = threading.Thread(target=lambda: (rec.enter(5), rec.leave(5)), name="before")
    t.start()
    t.join()
    rec.enter(1)
    pid = os.fork()
    if pid == 0:  # the child: exit status 0 only if every check passed
        status = 1
        try:
            rec.enter(2)
            rec.leave(2)
            after = threading.Thread(target=lambda: (rec.enter(6), rec.leave(6)), name="after")
            after.start()
            after.join()
            closed, exported = rec.export(time.monotonic_ns())
            trees = {token: native.tree_of(rows) for token, rows in exported}
            ok = (
                closed == 1
                and set(trees) == {threading.current_thread().name, "before", "after"}
                and trees[threading.current_thread().name].children[1].children[2].calls == 1
                and trees["after"].children[6].calls == 1
            )
            status = 0 if ok else 1
        finally:
            os._exit(status)
    rec.leave(1)
    _, wait_status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(wait_status) == 0


@pytest.fixture
def tool() -> Iterator[int]:
    """A free sys.monitoring tool id, released (with its local events) afterwards."""
    mon = getattr(sys, "monitoring", None)
    if mon is None:
        pytest.skip("sys.monitoring is 3.12+")
    free = [t for t in range(6) if mon.get_tool(t) is None]
    if not free:
        pytest.skip("no free sys.monitoring tool id")
    mon.use_tool_id(free[0], "profkit-test")
    try:
        yield free[0]
    finally:
        for event in (mon.events.PY_START, mon.events.PY_RETURN):
            mon.register_callback(free[0], event, None)
        mon.free_tool_id(free[0])


def _traced() -> int:
    return 1


def _watch(tool: int, on: bool) -> None:
    mon = sys.monitoring  # type: ignore[attr-defined]
    events = mon.events.PY_START | mon.events.PY_RETURN if on else 0
    mon.set_local_events(tool, _traced.__code__, events)


def test_a_recorder_dropped_by_its_own_monitoring_callback_survives_the_event(tool: int) -> None:
    """The interpreter holds no reference to a callback while calling it: the detach that
    new_thread (here) or on_error does may free the callback and the recorder with it."""
    mon = sys.monitoring  # type: ignore[attr-defined]
    holder: list[Any] = []

    def new_thread() -> object:
        mon.register_callback(tool, mon.events.PY_START, None)
        holder.clear()
        gc.collect()
        return "t"

    holder.append(_new(new_thread))
    mon.register_callback(tool, mon.events.PY_START, holder[0].py_start)
    _watch(tool, True)
    try:
        assert _traced() == 1
    finally:
        _watch(tool, False)
    assert holder == []


def test_an_on_error_that_detaches_and_drops_the_recorder_is_safe(tool: int) -> None:
    mon = sys.monitoring  # type: ignore[attr-defined]
    holder: list[Any] = []
    reports: list[str] = []

    def broken() -> object:
        raise ZeroDivisionError("new_thread broke")

    def detach(exc: BaseException, where: str) -> None:
        reports.append(where)
        for event in (mon.events.PY_START, mon.events.PY_RETURN):
            mon.register_callback(tool, event, None)
        holder.clear()
        gc.collect()

    holder.append(_new(broken))
    start = holder[0].__profkit_monitoring__("enter", detach)
    leave = holder[0].__profkit_monitoring__("leave", detach)
    mon.register_callback(tool, mon.events.PY_START, start)
    mon.register_callback(tool, mon.events.PY_RETURN, leave)
    del start, leave
    _watch(tool, True)
    try:
        assert _traced() == 1
    finally:
        _watch(tool, False)
    assert reports == ["function_enter"] and holder == []


def test_a_recursion_error_is_the_programs_and_never_reaches_on_error() -> None:
    """As on the collector's Python paths: at the recursion limit, calling on_error could
    overflow again, into the program; the event is skipped instead."""
    asked: list[int] = []

    def at_the_limit() -> object:
        asked.append(1)
        raise RecursionError

    rec = _new(at_the_limit)
    errors: list[str] = []
    start = rec.__profkit_monitoring__("enter", lambda exc, where: errors.append(where))
    code = at_the_limit.__code__
    assert start(code, 0) is None
    assert rec.py_return(code, 0, None) is None
    assert errors == [] and len(asked) == 2  # not remembered: asked again next time
    with pytest.raises(RecursionError):  # the id-shaped form raises: its caller decides
        rec.enter(1)


def _tp_clear() -> Callable[[Any], int]:
    """The Recorder type's tp_clear slot, called as the garbage collector does (GIL held)."""
    assert native.Recorder is not None
    base = id(native.Recorder)
    head = ctypes.sizeof(ctypes.c_ssize_t) * 3  # PyObject_VAR_HEAD, release builds
    pointer = ctypes.sizeof(ctypes.c_void_p)
    name = ctypes.c_char_p.from_address(base + head).value
    if name != b"profkit.profilers.elt._native.Recorder":
        pytest.skip("unexpected PyTypeObject layout (a debug build?)")
    # tp_name .. tp_as_buffer, tp_flags, tp_doc, tp_traverse: 21 pointer-sized fields
    address = ctypes.c_void_p.from_address(base + head + 21 * pointer).value
    assert address is not None
    clear: Callable[[Any], int] = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object)(address)
    return clear


def test_events_after_the_collector_cleared_the_recorder_record_nothing() -> None:
    now = [0]
    rec = _new(lambda: ("t", "T"), clock=lambda: now[0])
    rec.enter(1)
    assert _tp_clear()(rec) == 0
    for fid in (1, 2):  # its clock is gone: nothing may mix CLOCK_MONOTONIC in
        rec.enter(fid)
        rec.leave(fid)
        assert rec.py_start(_tp_clear.__code__, 0) is None
        assert rec.py_return(_tp_clear.__code__, 0, None) is None
    rec.quiet_this_thread()
    assert rec.export(10) == (0, [])  # its tokens are gone with the cycle they may form


def test_quiet_this_thread_inside_the_clock_holds_for_that_event() -> None:
    quiet = [False]

    def clock() -> int:
        if quiet[0]:
            rec.quiet_this_thread()
        return 0

    rec = _new(lambda: "t", clock=clock)
    rec.enter(1)
    quiet[0] = True
    rec.enter(2)  # quieted while its clock ran: not pushed, so never left open
    quiet[0] = False
    rec.leave(1)
    closed, ((_, rows),) = rec.export(0)
    assert closed == 1  # only 1, which was open when the thread went quiet
    assert native.tree_of(rows).children[1].children == {}


def _our_keys() -> set[object]:
    """This thread's thread-state-dict keys that belong to recorders."""
    get_dict = ctypes.pythonapi.PyThreadState_GetDict
    get_dict.restype = ctypes.py_object
    shared = get_dict()
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(shared))  # ctypes drops one on exit
    return {k for k in shared if isinstance(k, str) and k.startswith("profkit.profilers.elt.")}


def test_a_dead_recorder_leaves_no_entry_in_its_threads_dict() -> None:
    before = _our_keys()
    for _ in range(50):
        rec = _new(lambda: "t")
        rec.enter(1)
        rec.leave(1)
        quiet = _new(lambda: "q")
        quiet.quiet_this_thread()
        del rec, quiet
    gc.collect()
    assert _our_keys() <= before


def test_a_recorder_freed_while_an_exception_is_pending_keeps_it() -> None:
    """C code may free objects with an exception set: sorted() drops the keys it computed
    when a later key fails. The recorder (its only owner a key) must not eat the error."""

    def key(x: int) -> Any:
        if x == 1:
            rec = _new(lambda: "t")
            rec.enter(1)  # so this thread's dict has an entry to drop
            return rec
        raise KeyError("the program's")

    with pytest.raises(KeyError, match="the program's"):
        sorted([1, 2], key=key)
