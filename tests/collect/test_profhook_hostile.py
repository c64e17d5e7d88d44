"""The C setprofile dispatcher (``_profhook``) against hostile callers and re-entrant profilers.

Two kinds of test. The ``Hook`` object itself, driven directly: an uninitialized or
re-initialized object, table rows that are not ints, a program's own profile function
calling the hook it found; these crashed or misbehaved (use after free, NULL read,
silently removing the program's profile function) before the fixes in ``_profhook`` (``collect/csrc/``).
And profilers whose callbacks do what a profiler may do from inside an event (remove the
profile function, detach and attach again, change the filter, collect garbage, start
threads, raise): each program runs under both dispatchers and the notifications must be
the same. Build the module with ``-fsanitize=address,undefined`` to make these tests
memory checks (see ``docs/api.md``, "Overhead").
"""

from __future__ import annotations

import gc
import os
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from profkit.api import EventMask
from profkit.collect import attach, current_session, detach, setprofile
from tests.collect.children import wait_or_kill
from tests.collect.recording import Recorder

_profhook = pytest.importorskip("profkit.collect._profhook")

_REJECTED, _PLAIN, _GEN = 0, 1, 2  # setprofile's status values


def _tables(**over: Any) -> dict[str, Any]:
    """Keyword arguments for a bare Hook: a running session with empty tables."""
    seen: list[tuple[Any, ...]] = over.pop("seen", [])
    args: dict[str, Any] = {
        "status": {},
        "gen_code": {},
        "throwing": {},
        "state": [True],
        "slow": lambda frame, event, arg: seen.append(("slow", frame.f_code.co_name, event)),
        "fail": lambda exc, what: seen.append(("fail", type(exc).__name__, what)),
        "enter": None,
        "leave": None,
        "yield_": None,
        "resume": None,
        "plain_fast": _PLAIN,
        "gen_fast": _GEN,
        "transitions": False,
        "resume_op": setprofile._RESUME,
        "yield_op": setprofile._YIELD,
    }
    args.update(over)
    return args


def _installed(hook: object, body: Callable[[], object]) -> None:
    """Run ``body`` with ``hook`` as this thread's profile function."""
    old = sys.getprofile()
    sys.setprofile(hook)  # type: ignore[arg-type]
    try:
        body()
    finally:
        sys.setprofile(old)


def pk_leaf(x: int = 0) -> int:
    return x + 1


def pk_gen(n: int) -> Iterator[int]:
    for i in range(n):
        yield pk_leaf(i)


# -- the Hook object ----------------------------------------------------------------------


def test_an_uninitialized_hook_raises_instead_of_reading_null() -> None:
    """Hook.__new__ without __init__ read NULL tables (segfault)."""
    hook = _profhook.Hook.__new__(_profhook.Hook)
    with pytest.raises(TypeError, match="not initialized"):
        hook(sys._getframe(), "call", None)
    with pytest.raises(TypeError):
        hook.__init__()  # a failed __init__ leaves it uninitialized...
    with pytest.raises(TypeError, match="not initialized"):
        hook(sys._getframe(), "call", None)
    hook.__init__(**_tables(state=[False]))  # ...and a later one may still succeed
    assert hook(sys._getframe(), "no such event", None) is None


def test_a_hook_is_initialized_once() -> None:
    """A second __init__ freed the cache and the callables an event may be using."""
    seen: list[tuple[Any, ...]] = []
    fid = id(pk_leaf.__code__)
    hook = _profhook.Hook(**_tables(status={fid: _PLAIN}, enter=seen.append))
    with pytest.raises(TypeError, match="already initialized"):
        hook.__init__(**_tables())
    _installed(hook, lambda: pk_leaf(1))
    assert seen == [fid]  # still the first tables


class _Reinit:
    """An element whose ``==`` re-initializes the hook (from inside its ``enter``)."""

    hook: Any = None
    calls = 0

    def __eq__(self, other: object) -> bool:
        _Reinit.calls += 1
        _Reinit.hook.__init__(**_tables(state=[False]))
        return False

    __hash__ = object.__hash__


def test_reinitializing_from_inside_an_event_cannot_free_what_it_uses() -> None:
    """``enter`` = a C method that runs Python code and then uses its arguments.

    ``list.count`` compares the fid with each element; the first comparison
    re-initialized the hook, dropping the list (only the hook held ``enter``) and the
    cached fid while ``list.count`` still walked them: a use after free under ASan.
    """
    seen: list[tuple[Any, ...]] = []
    fid = id(pk_leaf.__code__)
    bait = [_Reinit(), _Reinit(), _Reinit()]
    hook = _profhook.Hook(**_tables(status={fid: _PLAIN}, enter=bait.count, seen=seen))
    _Reinit.hook, _Reinit.calls = hook, 0
    del bait
    try:
        _installed(hook, lambda: pk_leaf(1))
    finally:
        _Reinit.hook = None
    assert _Reinit.calls == 1  # the refused __init__ raised out of list.count...
    assert ("fail", "TypeError", "function_enter") in seen  # ...into the failure rule


class _Clearing:
    """A table value that is not an int: reading it as one ran ``__index__``."""

    def __init__(self, table: dict[int, Any]) -> None:
        self.table = table

    def __index__(self) -> int:
        self.table.clear()  # dropped the row (and its bytes) the hook was reading
        return 0


def test_table_rows_that_are_not_ints_go_to_the_slow_path() -> None:
    """A generator row whose offset ran Python code that freed the row (use after free)."""
    seen: list[tuple[Any, ...]] = []
    gen_fid, leaf_fid = id(pk_gen.__code__), id(pk_leaf.__code__)
    gen_code: dict[int, Any] = {}
    gen_code[gen_fid] = (pk_gen.__code__.co_code, _Clearing(gen_code))
    status: dict[int, Any] = {gen_fid: _GEN, leaf_fid: 2**80}  # and one out of long range
    hook = _profhook.Hook(**_tables(status=status, gen_code=gen_code, seen=seen))
    _installed(hook, lambda: list(pk_gen(1)))
    assert gen_code  # never read as an int
    assert ("slow", "pk_gen", "call") in seen
    assert ("slow", "pk_leaf", "call") in seen


@pytest.mark.parametrize("dispatcher", ["c", "python"])
def test_a_program_profile_function_calling_the_hook_stays_installed(
    dispatcher: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``old = sys.getprofile(); sys.setprofile(mine)`` where ``mine`` calls ``old``.

    The C hook, called from ``mine``, swapped itself in for this thread's profile
    function: ``mine`` saw one event and was gone. The Python hook never does that.
    """
    if dispatcher == "python":
        monkeypatch.setattr(setprofile, "_profhook", None)
    rec = Recorder(EventMask.ENTER_LEAVE)
    attach(rec, "setprofile")
    found = sys.getprofile()
    assert found is not None
    events: list[str] = []

    def mine(frame: Any, event: str, arg: Any) -> None:
        events.append(event)
        found(frame, event, arg)

    sys.setprofile(mine)
    try:
        pk_leaf(1)
        pk_leaf(2)
        still = sys.getprofile()
    finally:
        sys.setprofile(found)
        detach()
    assert still is mine
    assert len(events) >= 4  # both calls of pk_leaf at least
    assert rec.events.count(("enter", "pk_leaf")) == 2


# -- re-entrant profilers, both dispatchers -----------------------------------------------


class _Acting(Recorder):
    """A recorder that runs ``action`` inside its ``function_enter`` of ``pk_leaf``."""

    def __init__(self, action: Callable[[_Acting], None], times: int = 1) -> None:
        super().__init__(EventMask.ENTER_LEAVE)
        self.action = action
        self.times = times

    def function_enter(self, fid: int) -> None:  # type: ignore[override]
        super().function_enter(fid)
        if self.times and self.name(fid) == "pk_leaf":
            self.times -= 1
            self.action(self)


#: recorders an action attached during the current _run
_EXTRA: list[Recorder] = []


def _shown(events: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return [e for e in events if len(e) > 1 and str(e[1]).startswith("pk_")]


def _run(
    python: bool,
    make: Callable[[], Recorder],
    body: Callable[[], object],
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[list[tuple[Any, ...]], list[Recorder]]:
    """``body`` under a fresh ``make()`` recorder; the recorders attached on the way too."""
    with monkeypatch.context() as m:
        if python:
            m.setattr(setprofile, "_profhook", None)
        _EXTRA.clear()
        rec = make()
        attach(rec, "setprofile")
        try:
            body()
        finally:
            detach()
            sys.setprofile(None)
    return _shown(rec.events), list(_EXTRA)


def _program() -> None:
    pk_leaf(1)
    list(pk_gen(3))
    pk_leaf(2)
    g = pk_gen(4)
    next(g)
    g.close()
    sorted([3, 1, 2], key=pk_leaf)


def _unset(_: _Acting) -> None:
    sys.setprofile(None)


def _reattach(_: _Acting) -> None:
    """Detach this session from inside its own event and attach a new profiler."""
    detach()
    second = Recorder(EventMask.ENTER_LEAVE)
    _EXTRA.append(second)
    attach(second, "setprofile")


def _refilter(rec: _Acting) -> None:
    assert rec.info is not None
    rec.info.set_function_filter(lambda info: info.name != "pk_leaf")


def _collect(_: _Acting) -> None:
    gc.collect()


def _thread(_: _Acting) -> None:
    t = threading.Thread(target=_program)
    t.start()
    t.join()


def _raise(_: _Acting) -> None:
    raise ValueError("profiler bug")


ACTIONS: dict[str, tuple[Callable[[_Acting], None], int]] = {
    "setprofile_none": (_unset, 1),
    "detach_and_attach": (_reattach, 1),
    "set_function_filter": (_refilter, 1),
    "gc_collect": (_collect, 1000),
    "start_thread": (_thread, 1),
    "raise": (_raise, 1),
}


@pytest.mark.parametrize("name", sorted(ACTIONS))
def test_a_reentrant_profiler_sees_the_same_on_both_dispatchers(
    name: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    action, times = ACTIONS[name]
    ours, ours_extra = _run(False, lambda: _Acting(action, times), _program, monkeypatch)
    theirs, theirs_extra = _run(True, lambda: _Acting(action, times), _program, monkeypatch)
    gc.collect()  # the dropped hooks and sessions go now, not in some later test
    if name == "start_thread":  # the thread's events interleave with nothing: joined
        assert sorted(map(repr, ours)) == sorted(map(repr, theirs))
    else:
        assert ours == theirs
    assert [_shown(r.events) for r in ours_extra] == [_shown(r.events) for r in theirs_extra]
    assert ours[0] == ("enter", "pk_leaf")
    if name == "raise":
        assert capsys.readouterr().err.count("failed in function_enter") == 2


def test_detaching_inside_an_event_then_dropping_every_reference() -> None:
    """The hook may lose its last reference in the middle of its own event."""
    rec = _Acting(lambda _: (detach(), sys.setprofile(None), gc.collect()))
    attach(rec, "setprofile")
    try:
        pk_leaf(1)
        pk_leaf(2)  # not seen: detached
    finally:
        detach()
    del rec.action
    assert _shown(rec.events) == [("enter", "pk_leaf")]
    assert current_session() is None


# -- the program at its edges -------------------------------------------------------------


def pk_deep(n: int) -> int:
    return pk_deep(n + 1) + 1


def pk_deep_gen(n: int) -> Iterator[int]:
    yield from pk_deep_gen(n + 1)
    yield n


def test_at_the_recursion_limit_notifications_stay_paired_and_the_hook_stays() -> None:
    """The program overflows the stack (twice) under the C dispatcher.

    The profiler's calls fail there too; each such notification is dropped with its
    partner (the failure rule), the hook stays installed and the session attached. (The
    Python hook does not manage this: entering its own frame raises at the limit, outside
    its ``try``, and CPython then unsets the profile function for the thread.)
    """
    rec = Recorder(EventMask.ENTER_LEAVE | EventMask.EXCEPTIONS)
    attach(rec, "setprofile")
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(250)
    try:
        for overflow in (lambda: pk_deep(0), lambda: list(pk_deep_gen(0))):
            with pytest.raises(RecursionError):
                overflow()
        hook, attached = sys.getprofile(), current_session()
    finally:
        sys.setrecursionlimit(limit)
        detach()
    assert isinstance(hook, _profhook.Hook)
    assert attached is not None
    for name in ("pk_deep", "pk_deep_gen"):
        enters = rec.events.count(("enter", name))
        assert enters > 100
        assert rec.events.count(("leave", name)) == enters
        assert rec.events.count(("unwind", name)) == enters


def pk_attaching(rec: Recorder, suspended: Iterator[int]) -> int:
    """Attaches from inside a call chain, then returns out of frames it never entered."""
    attach(rec, "setprofile")
    pk_leaf(1)
    rest = list(suspended)  # a generator suspended at attach, resumed after it
    return pk_leaf(len(rest))


def pk_attach_caller(rec: Recorder, attach_here: bool) -> int:
    g = pk_gen(3)
    next(g)
    first = pk_attaching(rec, g) if attach_here else pk_leaf(sum(g))
    return first + pk_leaf(0)


def pk_attach_outer(rec: Recorder) -> int:
    pk_attach_caller(rec, True)  # attaches three frames down
    pk_attach_caller(rec, False)  # the codes running at attach, entered afresh
    return pk_attach_caller(rec, False)  # and once more, on cached rows


@pytest.mark.parametrize(
    "mask", [EventMask.ENTER_LEAVE, EventMask.ENTER_LEAVE | EventMask.FUNCTION_RETVAL]
)
def test_frames_running_at_attach_are_treated_alike(
    mask: EventMask, monkeypatch: pytest.MonkeyPatch
) -> None:
    streams = []
    for python in (False, True):
        with monkeypatch.context() as m:
            if python:
                m.setattr(setprofile, "_profhook", None)
            rec = Recorder(mask)
            try:
                pk_attach_outer(rec)
            finally:
                detach()
            streams.append(_shown(rec.events))
    assert streams[0] == streams[1]
    assert ("enter", "pk_leaf") in streams[0]


_FORKED: list[int] = []


def _fork(_: _Acting) -> None:
    """fork() from inside the profiler's method, i.e. inside the dispatcher's call."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            pk_leaf(5)  # the after-fork handler detached the parent's session here
            code = 0 if current_session() is None and sys.getprofile() is None else 3
        finally:
            os._exit(code)
    _FORKED.append(pid)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # 3.12+: fork with threads
def test_fork_inside_an_event(monkeypatch: pytest.MonkeyPatch) -> None:
    streams = []
    for python in (False, True):
        _FORKED.clear()
        events, _ = _run(python, lambda: _Acting(_fork), _program, monkeypatch)
        streams.append(events)
        (pid,) = _FORKED
        assert wait_or_kill(pid, 10.0) == 0
    assert streams[0] == streams[1]
    assert streams[0].count(("enter", "pk_leaf")) > 1  # the parent goes on profiling


@pytest.mark.parametrize("dispatcher", ["c", "python"])
def test_throw_into_an_unstarted_generator_reports_nothing(
    dispatcher: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def body() -> None:
        g = pk_gen(1)
        try:  # noqa: SIM105 - the program's own try/except is what is exercised
            g.throw(KeyError)
        except KeyError:
            pass

    events, _ = _run(
        dispatcher == "python", lambda: Recorder(EventMask.ENTER_LEAVE), body, monkeypatch
    )
    assert events == []


@pytest.mark.parametrize("dispatcher", ["c", "python"])
def test_a_rearm_keeps_other_threads_traced(
    dispatcher: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    go, entered, again = threading.Event(), threading.Event(), threading.Event()

    def worker() -> None:
        go.wait(10)
        pk_leaf(1)
        entered.set()
        again.wait(10)
        pk_leaf(2)

    def body() -> None:
        t = threading.Thread(target=worker)
        t.start()
        go.set()
        entered.wait(10)
        session = current_session()
        assert session is not None
        session.info.set_function_filter(lambda info: True)  # a rearm, from another thread
        again.set()
        t.join(10)

    events, _ = _run(
        dispatcher == "python", lambda: Recorder(EventMask.ENTER_LEAVE), body, monkeypatch
    )
    assert events.count(("enter", "pk_leaf")) == 2


def pk_finally_bare() -> Iterator[None]:
    try:
        yield
    finally:
        pk_leaf()


@pytest.mark.parametrize("dispatcher", ["c", "python"])
def test_a_generator_closed_through_a_finally_leaves_no_trace(
    dispatcher: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def body() -> None:
        g = pk_finally_bare()
        next(g)
        stale = id(g.gi_frame)
        g.close()  # GeneratorExit at the yield; the finally calls pk_leaf and re-raises
        del g
        unstarted = []  # kept alive, so each try gets another address
        for _ in range(100):
            g2 = pk_finally_bare()
            if id(g2.gi_frame) == stale:
                break
            unstarted.append(g2)
        else:
            pytest.skip("no generator frame got the closed one's address")
        next(g2)
        next(g2, None)

    events, _ = _run(
        dispatcher == "python", lambda: Recorder(EventMask.ENTER_LEAVE), body, monkeypatch
    )
    second = events[events.index(("leave", "pk_finally_bare")) + 1 :]
    assert second[:2] == [("enter", "pk_finally_bare"), ("yield", "pk_finally_bare")]
    assert second.count(("leave", "pk_finally_bare")) == 1
