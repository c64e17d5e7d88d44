"""The evalframe backend (3.11): the same events as setprofile, deep recursion, its
fall-back, stopping from a callback, forks; unavailable on 3.12+ with a reason."""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any

import pytest

from profkit.api import EventMask
from profkit.collect import attach, backends, detach, evalframe, select
from tests.collect import test_fork_reset
from tests.collect.recording import Recorder

AVAILABLE = backends.unavailable("evalframe") is None
needs_it = pytest.mark.skipif(not AVAILABLE, reason=str(backends.unavailable("evalframe")))


def test_unavailable_off_3_11_says_why() -> None:
    why = backends.unavailable("evalframe")
    if sys.version_info[:2] == (3, 11):
        assert why is None or "not built" in why
    else:
        assert why is not None and "3.11 only" in why


# -- programs run under both backends -----------------------------------------------


def ef_leaf(x: int) -> int:
    return x + 1


def ef_gen(n: int) -> Generator[int, None, None]:
    for i in range(n):
        yield ef_leaf(i)


def ef_outer() -> Generator[int, None, None]:
    yield from ef_gen(2)
    yield ef_leaf(10)


def ef_catching() -> Generator[int, None, None]:
    try:
        yield 1
    except KeyError:
        yield 2


def ef_boom() -> None:
    raise ValueError("boom")


def ef_catcher() -> str:
    try:
        ef_boom()
    except ValueError:
        return "caught"
    return "no"


def ef_recurse(n: int) -> int:
    return 0 if n == 0 else 1 + ef_recurse(n - 1)


async def ef_child(i: int) -> int:
    await asyncio.sleep(0)
    return ef_leaf(i)


async def ef_parent() -> int:
    return sum(await asyncio.gather(ef_child(1), ef_child(2)))


def program() -> None:
    list(ef_gen(3))
    list(ef_outer())
    g = ef_gen(5)
    next(g)
    g.close()  # a throw() that unwinds it
    c = ef_catching()
    next(c)
    assert c.throw(KeyError) == 2  # a throw() it catches, yielding again
    c.close()
    u = ef_gen(1)
    with pytest.raises(KeyError):
        u.throw(KeyError)  # thrown into before it started: none of its code runs
    ef_catcher()
    ef_recurse(20)
    with pytest.raises(ValueError):
        ef_boom()
    assert asyncio.run(ef_parent()) == 5
    t = threading.Thread(target=ef_recurse, args=(3,))
    t.start()
    t.join()


def _events(backend: str, body: Callable[[], object]) -> list[tuple[Any, ...]]:
    rec = Recorder(EventMask.ENTER_LEAVE)
    session = attach(rec, backend)
    assert session.backend == backend
    try:
        body()
    finally:
        detach()
    kinds = {"enter", "leave", "yield", "resume"}
    return [e for e in rec.events if e[0] in kinds and str(e[1]).startswith("ef_")]


@needs_it
def test_the_same_events_as_setprofile() -> None:
    expected = _events("setprofile", program)
    assert ("yield", "ef_catching") in expected and ("resume", "ef_child") in expected
    assert _events("evalframe", program) == expected


@needs_it
def test_recursion_to_the_default_limit_on_every_thread() -> None:
    """Every Python call takes C stack under an eval-frame function (3.11 no longer
    inlines them): the default recursion limit must still be reachable."""
    limit = sys.getrecursionlimit()
    assert limit >= 1000  # the default
    here, frame = 0, sys._getframe()
    while frame.f_back is not None:
        here, frame = here + 1, frame.f_back
    depth, thread_depth = limit - here - 10, limit - 10  # all but the frames beneath
    results: list[int] = []
    rec = Recorder(EventMask.ENTER_LEAVE)
    attach(rec, "evalframe")
    try:
        results.append(ef_recurse(depth))
        t = threading.Thread(target=lambda: results.append(ef_recurse(thread_depth)))
        t.start()
        t.join()
        with pytest.raises(RecursionError):
            ef_recurse(sys.getrecursionlimit() + 10)
    finally:
        detach()
    assert results == [depth, thread_depth]
    entered = [e for e in rec.events if e[:2] == ("enter", "ef_recurse")]
    left = [e for e in rec.events if e[:2] == ("leave", "ef_recurse")]
    assert len(entered) == len(left) >= depth + thread_depth + 2


@needs_it
def test_refused_install_falls_back_to_setprofile(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(evalframe._evalframe, "install", lambda hook: "a JIT is installed")
    events = _events("evalframe", lambda: ef_recurse(2))
    assert events.count(("enter", "ef_recurse")) == 3
    assert "evalframe backend refused (a JIT is installed); using setprofile" in (
        capsys.readouterr().err
    )


@needs_it
def test_stop_from_inside_a_callback() -> None:
    class Stopper(Recorder):
        def function_enter(self, fid: int) -> None:
            super().function_enter(fid)
            if self.name(fid) == "ef_leaf":
                detach()

    rec = Stopper(EventMask.ENTER_LEAVE)
    attach(rec, "evalframe")
    try:
        list(ef_gen(3))
        ef_recurse(2)
    finally:
        detach()
    assert rec.calls({"ef_gen", "ef_leaf", "ef_recurse"}) == [
        ("enter", "ef_gen"),
        ("enter", "ef_leaf"),
    ]
    assert _events("evalframe", lambda: ef_recurse(1)).count(("leave", "ef_recurse")) == 2


@needs_it
def test_a_failing_enter_is_handled_once_outside_the_hook(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The failure rule's own Python code (and what it imports) runs with the hook mute:
    seen by it, each of its frames would fail the enter again before the failure is
    claimed, recursing without end (a process's start-up hung so)."""

    class Bad(Recorder):
        enters = 0

        def function_enter(self, fid: int) -> None:
            Bad.enters += 1
            raise ValueError("kaput")

    session = attach(Bad(EventMask.ENTER_LEAVE), "evalframe")
    assert ef_recurse(5) == 5  # the program is unaffected
    assert Bad.enters == 1
    assert not session.active
    assert capsys.readouterr().err.count("failed in function_enter: ValueError: kaput") == 1


def ef_rearming(session: Any, it: Generator[int, None, None]) -> int:
    next(it)
    session.info.set_function_filter(lambda info: True)  # a rearm, this frame open
    return ef_leaf(0)


def ef_waiting(ready: threading.Event, go: threading.Event) -> int:
    ready.set()
    go.wait()
    return ef_leaf(1)


def _across_a_rearm(backend: str) -> list[tuple[Any, ...]]:
    rec = Recorder(EventMask.ENTER_LEAVE)
    session = attach(rec, backend)
    ready, go = threading.Event(), threading.Event()
    t = threading.Thread(target=ef_waiting, args=(ready, go))
    try:
        t.start()
        ready.wait()
        it = ef_gen(3)
        ef_rearming(session, it)  # suspended in ef_gen, open in ef_waiting (other thread)
        go.set()
        t.join()
        assert list(it) == [2, 3]
        ef_recurse(1)
    finally:
        detach()
    return [e for e in rec.events if e[0] != "shutdown" and str(e[1]).startswith("ef_")]


@needs_it
def test_frames_open_at_a_rearm_as_setprofile() -> None:
    """A rearm ends the old hook's frames as setprofile's does: frames open then get no
    leave (setprofile tracks their codes as running before it; the profiler closes them
    at its end), a suspended generator resumes, yields and leaves under the new hook,
    and frames entered after it pair up."""
    expected = _across_a_rearm("setprofile")
    got = _across_a_rearm("evalframe")
    assert got == expected
    assert ("leave", "ef_rearming") not in got and ("leave", "ef_waiting") not in got
    assert got[-4:] == [
        ("enter", "ef_recurse"),
        ("enter", "ef_recurse"),
        ("leave", "ef_recurse"),
        ("leave", "ef_recurse"),
    ]
    assert ("resume", "ef_gen") in got and ("leave", "ef_gen") in got


@needs_it
@pytest.mark.parametrize(
    "case",
    [
        "test_the_child_records_only_what_it_runs_after_the_fork",
        "test_a_fork_deep_in_a_call_stack",
        "test_a_fork_from_a_thread",
        "test_a_fork_in_a_child_of_a_child",
    ],
)
def test_forks(case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fork-reset cases of test_fork_reset.py, with ELT trace mode on this backend."""
    env = test_fork_reset.ENV | {"PROFKIT_BACKEND": "evalframe", "PROFKIT_C_CALLS": "0"}
    monkeypatch.setattr(test_fork_reset, "ENV", env)
    getattr(test_fork_reset, case)(tmp_path)


@needs_it
def test_auto_takes_it_when_the_mask_needs_no_c_calls() -> None:
    assert select.choose("auto", EventMask.ENTER_LEAVE).name == "evalframe"
    assert select.choose("auto", EventMask.ENTER_LEAVE | EventMask.FIRST_EXECUTION).name == (
        "evalframe"
    )
    for needs in (EventMask.CODE_TRANSITIONS, EventMask.EXCEPTIONS, EventMask.FUNCTION_ARGS):
        choice = select.choose("auto", EventMask.ENTER_LEAVE | needs)
        assert choice.name == "setprofile"
        assert "evalframe refused: the mask needs" in choice.reason


@needs_it
def test_auto_leaves_it_to_another_frame_evaluation_function(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(evalframe, "conflict", lambda: "a JIT is installed")
    choice = select.choose("auto", EventMask.ENTER_LEAVE)
    assert choice.name == "setprofile"
    assert "evalframe refused: a JIT is installed" in choice.reason


def test_auto_never_takes_it_off_3_11() -> None:
    if sys.version_info[:2] != (3, 11):
        assert select.choose("auto", EventMask.ENTER_LEAVE).name != "evalframe"
