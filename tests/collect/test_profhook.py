"""The setprofile backend's C dispatcher (``_profhook``) delivers what the Python one does.

Every collector test runs on both dispatchers through the ``backend`` fixture; here a
property test drives random programs (plain calls, generators resumed, closed and thrown
into, exceptions caught and not, through generators too, ``yield from`` chains,
coroutines driven by hand and by asyncio, C calls calling back into Python, threads)
through both
and compares the notification streams, and a few tests cover what only the C object does:
swapping itself in for the Python-level trampoline, removing itself after a detach, and
letting an exception the profiler does not contain reach the program.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from profkit.api import EventMask
from profkit.collect import attach, detach, setprofile
from tests.collect.recording import Recorder

_profhook = pytest.importorskip("profkit.collect._profhook")

MASKS = [
    EventMask.ENTER_LEAVE,
    EventMask.ENTER_LEAVE | EventMask.EXCEPTIONS,
    EventMask.ENTER_LEAVE | EventMask.FUNCTION_ARGS | EventMask.FUNCTION_RETVAL,
    EventMask.ENTER_LEAVE | EventMask.CODE_TRANSITIONS,
]


def _shown(name: str) -> bool:
    return name.startswith("pk_")


def record(
    body: Callable[[], object], mask: EventMask, python: bool, monkeypatch: pytest.MonkeyPatch
) -> list[tuple[Any, ...]]:
    with monkeypatch.context() as m:
        if python:
            m.setattr(setprofile, "_profhook", None)
        rec = Recorder(mask)
        attach(rec, "setprofile")
        try:
            body()
        except ValueError:
            pass
        finally:
            detach()
    return [e for e in rec.events if len(e) > 1 and isinstance(e[1], str) and _shown(e[1])]


# -- programs ------------------------------------------------------------------------------

STEP_NAMES = [
    "call", "gen", "gen_close", "gen_throw", "raise", "catch", "c_back", "thread",
    "yield_from", "coro", "asyncio", "throw_uncaught", "gen_raise", "close_finally",
    "gen_in_gen",
]  # fmt: skip
STEPS = st.lists(st.sampled_from(STEP_NAMES), min_size=1, max_size=8)


def pk_leaf(x: int) -> int:
    return x + 1


def pk_gen(n: int):  # type: ignore[no-untyped-def]
    for i in range(n):
        yield pk_leaf(i)


def pk_catching_gen():  # type: ignore[no-untyped-def]
    while True:
        try:
            yield 1
        except KeyError:
            yield -1


def pk_raiser() -> None:
    raise ValueError("pk")


def pk_delegating():  # type: ignore[no-untyped-def]
    got = yield from pk_gen(2)
    yield from pk_catching_gen_once()
    return got


def pk_catching_gen_once():  # type: ignore[no-untyped-def]
    try:
        yield 1
    except KeyError:
        pk_leaf(0)


def pk_raising_gen():  # type: ignore[no-untyped-def]
    yield pk_leaf(1)
    pk_raiser()


def pk_finally_gen():  # type: ignore[no-untyped-def]
    try:
        yield 1
        yield 2
    finally:
        pk_leaf(3)


def pk_outer_gen():  # type: ignore[no-untyped-def]
    for x in pk_gen(2):  # a generator driving another, both suspended at once
        yield x
        list(pk_gen(1))


class _Suspend:
    """An awaitable that suspends its coroutine once (no event loop needed)."""

    def __await__(self):  # type: ignore[no-untyped-def]
        yield None


async def pk_coro() -> int:
    await _Suspend()
    return pk_leaf(1)


async def pk_async_main() -> int:
    import asyncio

    await asyncio.sleep(0)
    return await pk_coro_sleeping()


async def pk_coro_sleeping() -> int:
    import asyncio

    await asyncio.sleep(0)
    return pk_leaf(2)


def pk_run(steps: list[str]) -> None:
    for step in steps:
        if step == "call":
            pk_leaf(1)
        elif step == "gen":
            list(pk_gen(3))
        elif step == "gen_close":
            g = pk_gen(5)
            next(g)
            g.close()
        elif step == "gen_throw":
            g2 = pk_catching_gen()
            next(g2)
            g2.throw(KeyError)
            g2.close()
        elif step == "raise":
            try:  # noqa: SIM105 - the program's own try/except is what is exercised
                pk_raiser()
            except ValueError:
                pass
        elif step == "catch":
            try:
                pk_run(["raise", "call"])
                pk_raiser()
            except ValueError:
                pk_leaf(2)
        elif step == "c_back":
            sorted([3, 1, 2], key=pk_leaf)
        elif step == "yield_from":
            d = pk_delegating()
            next(d), next(d), next(d)  # into the second delegate
            try:  # noqa: SIM105 - the program's own try/except is what is exercised
                d.throw(KeyError)  # caught two generators down; the chain finishes
            except StopIteration:
                pass
        elif step == "coro":
            c = pk_coro()
            c.send(None)
            try:  # noqa: SIM105
                c.send(None)
            except StopIteration:
                pass
        elif step == "asyncio":
            import asyncio

            asyncio.run(pk_async_main())
        elif step == "throw_uncaught":
            g3 = pk_gen(3)
            next(g3)
            try:  # noqa: SIM105
                g3.throw(KeyError)  # unwinds the generator
            except KeyError:
                pass
        elif step == "gen_raise":
            try:  # noqa: SIM105
                list(pk_raising_gen())
            except ValueError:
                pass
        elif step == "close_finally":
            f = pk_finally_gen()
            next(f)
            f.close()  # runs the finally, which calls pk_leaf
        elif step == "gen_in_gen":
            list(pk_outer_gen())
        elif step == "thread":
            t = threading.Thread(target=pk_run, args=(["call", "gen"],))
            t.start()
            t.join()


@pytest.mark.parametrize("step", STEP_NAMES)
@pytest.mark.parametrize("mask", MASKS, ids=lambda m: str(int(m)))
def test_each_program_shape_alone(step: str, mask: EventMask) -> None:
    """Every shape on its own, so none depends on hypothesis drawing it."""
    compare(["call", step, step], mask)


@settings(max_examples=60, deadline=None)
@given(STEPS, st.sampled_from(MASKS))
def test_both_dispatchers_deliver_the_same_notifications(steps: list[str], mask: EventMask) -> None:
    compare(steps, mask)


def compare(steps: list[str], mask: EventMask) -> None:
    with pytest.MonkeyPatch.context() as mp:
        ours = record(lambda: pk_run(steps), mask, python=False, monkeypatch=mp)
        theirs = record(lambda: pk_run(steps), mask, python=True, monkeypatch=mp)
    # Threads interleave freely: compare each thread's order by sorting stably per name set.
    if "thread" in steps:
        assert sorted(map(repr, ours)) == sorted(map(repr, theirs))
    else:
        assert ours == theirs
    assert ours  # something was seen


def test_a_new_thread_switches_to_the_c_function() -> None:
    """threading.setprofile hands the thread the Hook object; its first event swaps it in."""
    rec = Recorder(EventMask.ENTER_LEAVE)
    attach(rec, "setprofile")
    seen: list[object] = []
    try:
        t = threading.Thread(target=lambda: (pk_leaf(1), seen.append(sys.getprofile())))
        t.start()
        t.join()
    finally:
        detach()
    assert isinstance(seen[0], _profhook.Hook)
    assert ("enter", "pk_leaf") in rec.events


def test_native_false_keeps_the_python_hook() -> None:
    rec = Recorder(EventMask.ENTER_LEAVE)
    attach(rec, "setprofile", native=False)
    try:
        pk_leaf(1)
        hook = sys.getprofile()
    finally:
        detach()
    assert hook is not None and not isinstance(hook, _profhook.Hook)
    assert ("enter", "pk_leaf") in rec.events


def test_after_detach_other_threads_drop_the_hook() -> None:
    """A thread the detach could not reach removes the hook at its next event."""
    rec = Recorder(EventMask.ENTER_LEAVE)
    started, go = threading.Event(), threading.Event()
    after: list[object] = []

    def worker() -> None:
        started.set()
        go.wait(10)
        pk_leaf(1)  # first event after the detach: the hook removes itself
        after.append(sys.getprofile())

    attach(rec, "setprofile")
    t = threading.Thread(target=worker)
    t.start()
    started.wait(10)
    detach()
    go.set()
    t.join()
    assert after == [None]
    assert ("enter", "pk_leaf") not in rec.events


class _Interrupting(Recorder):
    def function_enter(self, fid: int) -> None:  # type: ignore[override]
        super().function_enter(fid)
        if self.name(fid) == "pk_leaf" and not getattr(self, "done", False):
            self.done = True
            raise KeyboardInterrupt


def test_an_exception_the_profiler_lets_through_reaches_the_program() -> None:
    """Not an Exception (the failure rule's): into the program, and tracing goes on."""
    rec = _Interrupting(EventMask.ENTER_LEAVE)
    attach(rec, "setprofile")
    try:
        with pytest.raises(KeyboardInterrupt):
            pk_leaf(1)
        pk_leaf(2)
    finally:
        detach()
    assert rec.events.count(("enter", "pk_leaf")) == 2
    assert rec.events.count(("leave", "pk_leaf")) == 2  # the interrupted frame unwound: paired


def test_the_hook_object_checks_its_arguments() -> None:
    with pytest.raises(TypeError):
        _profhook.Hook()
    state = [False]
    hook = _profhook.Hook(
        status={}, gen_code={}, throwing={}, state=state, slow=lambda *a: None,
        fail=lambda *a: None, enter=None, leave=None, yield_=None, resume=None,
        plain_fast=1, gen_fast=2, transitions=False, resume_op=0, yield_op=0,
    )  # fmt: skip
    with pytest.raises(TypeError):
        hook(None, "call", None)
    assert hook(sys._getframe(), "no such event", None) is None
    assert sys.getprofile() is None  # a stopped hook never installs itself


def test_many_functions_grow_the_code_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """More codes than the first cache table holds (256 slots, half full): rows survive growth."""
    namespace: dict[str, Any] = {}
    exec(  # 600 distinct code objects, plain and generator
        "\n".join(
            f"def pk_f{i}():\n    return {i}\ndef pk_g{i}():\n    yield {i}" for i in range(300)
        ),
        namespace,
    )
    funcs = [namespace[f"pk_f{i}"] for i in range(300)]
    gens = [namespace[f"pk_g{i}"] for i in range(300)]

    def body() -> None:
        for _ in range(2):  # the second round runs on cached rows only
            for f, g in zip(funcs, gens, strict=True):
                f()
                list(g())

    ours = record(body, EventMask.ENTER_LEAVE, python=False, monkeypatch=monkeypatch)
    theirs = record(body, EventMask.ENTER_LEAVE, python=True, monkeypatch=monkeypatch)
    assert ours == theirs
    assert len(ours) == 2 * 300 * 6  # f: enter, leave; g: enter, yield, resume, leave
