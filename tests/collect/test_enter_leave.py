"""Enter/leave, generators, exceptions and the shadow stack on every tracing backend."""

from __future__ import annotations

import sys
import threading

from profkit.api import EventMask
from profkit.collect import attach, current_session, detach
from tests.collect.capable import require
from tests.collect.recording import Recorder


def leaf(x: int) -> int:
    return x + 1


def middle(x: int) -> int:
    return leaf(x) * 2


def gen(n: int):  # type: ignore[no-untyped-def]
    for i in range(n):
        yield leaf(i)


def boom() -> None:
    raise ValueError("boom")


def catcher() -> str:
    try:
        boom()
    except ValueError:
        return "caught"
    return "no"


def run(backend: str, mask: EventMask, body, **options):  # type: ignore[no-untyped-def]
    rec = Recorder(mask, **options)
    session = attach(rec, backend)
    assert session.backend == backend
    assert current_session() is session
    try:
        result = body()
    finally:
        detach()
    return rec, result


def test_enter_leave_pair(backend: str) -> None:
    rec, result = run(backend, EventMask.ENTER_LEAVE, lambda: middle(1))
    assert result == 4
    assert rec.calls({"middle", "leaf"}) == [
        ("enter", "middle"),
        ("enter", "leaf"),
        ("leave", "leaf"),
        ("leave", "middle"),
    ]
    assert rec.shutdowns == 1


def test_detach_idempotent(backend: str) -> None:
    rec, _ = run(backend, EventMask.ENTER_LEAVE, lambda: None)
    detach()
    detach()
    assert rec.shutdowns == 1
    assert current_session() is None
    middle(1)
    assert not rec.calls({"middle"})


def test_generator_yield_resume(backend: str) -> None:
    rec, result = run(backend, EventMask.ENTER_LEAVE, lambda: list(gen(2)))
    assert result == [1, 2]
    assert rec.calls({"gen"}) == [
        ("enter", "gen"),
        ("yield", "gen"),
        ("resume", "gen"),
        ("yield", "gen"),
        ("resume", "gen"),
        ("leave", "gen"),
    ]


def test_exception_unwinds_pair_up(backend: str) -> None:
    mask = EventMask.ENTER_LEAVE | EventMask.EXCEPTIONS
    require(backend, mask)
    rec, result = run(backend, mask, catcher)
    assert result == "caught"
    assert rec.calls({"catcher", "boom"}) == [
        ("enter", "catcher"),
        ("enter", "boom"),
        ("unwind", "boom"),
        ("leave", "boom"),
        ("leave", "catcher"),
    ]


def test_shadow_stack_tracks_calls(backend: str) -> None:
    require(backend, EventMask.ENTER_LEAVE | EventMask.ENABLE_SHADOW_STACK)
    seen: list[tuple[str, ...]] = []

    class Shadow(Recorder):
        def function_enter(self, fid: int) -> None:  # type: ignore[override]
            assert self.info is not None
            stack = self.info.get_shadow_stack(self.info.get_current_thread_id())
            seen.append(tuple(self.name(f) for f in stack))

    rec = Shadow(EventMask.ENTER_LEAVE | EventMask.ENABLE_SHADOW_STACK)
    attach(rec, backend)
    list(gen(1))
    middle(1)
    detach()
    assert ("gen", "leaf") in seen
    assert ("middle", "leaf") in seen


def test_threads_are_traced(backend: str) -> None:
    def body() -> None:
        t = threading.Thread(target=middle, args=(1,))
        t.start()
        t.join()

    rec, _ = run(backend, EventMask.ENTER_LEAVE, body)
    assert ("enter", "middle") in rec.events


def test_filter_rejects(backend: str) -> None:
    rec, _ = run(
        backend, EventMask.ENTER_LEAVE, lambda: middle(1), filter=lambda info: info.name != "leaf"
    )
    assert rec.calls({"middle", "leaf"}) == [("enter", "middle"), ("leave", "middle")]


def test_function_info(backend: str) -> None:
    rec = Recorder(EventMask.ENTER_LEAVE | EventMask.FIRST_EXECUTION)
    session = attach(rec, backend)
    middle(1)
    info = session.info
    detach()
    firsts = [e[1] for e in rec.of("first")]
    assert firsts.count("middle") == 1
    fids = [f for f in list(info.functions.codes) if info.get_function_info(f).name == "middle"]  # type: ignore[arg-type]
    fi = info.get_function_info(fids[0])  # type: ignore[arg-type]
    assert fi.module == __name__
    assert fi.full_name == f"{__name__}.middle"
    assert fi.filename == __file__
    assert fi.first_line == middle.__code__.co_firstlineno
    assert not fi.is_native and not fi.is_generator
    assert sys.modules[fi.module]


def exits() -> None:
    raise SystemExit(4)


def interrupted() -> None:
    raise KeyboardInterrupt


def test_system_exit_and_interrupt_unwind(backend: str) -> None:
    import pytest

    require(backend, EventMask.ENTER_LEAVE | EventMask.EXCEPTIONS)
    rec = Recorder(EventMask.ENTER_LEAVE | EventMask.EXCEPTIONS)
    attach(rec, backend)
    with pytest.raises(SystemExit):
        exits()
    with pytest.raises(KeyboardInterrupt):
        interrupted()
    detach()
    assert rec.calls({"exits", "interrupted"}) == [
        ("enter", "exits"),
        ("unwind", "exits"),
        ("leave", "exits"),
        ("enter", "interrupted"),
        ("unwind", "interrupted"),
        ("leave", "interrupted"),
    ]


def test_raising_profiler_reported_once_and_detached(backend: str, capsys) -> None:  # type: ignore[no-untyped-def]

    class Bad(Recorder):
        def function_enter(self, fid: int) -> None:  # type: ignore[override]
            raise ValueError("kaput")

    rec = Bad(EventMask.ENTER_LEAVE)
    session = attach(rec, backend)
    assert middle(1) == 4  # the program is unaffected
    assert middle(2) == 6
    assert capsys.readouterr().err.splitlines() == [
        f"profkit: profiler {__name__}.{Bad.__qualname__} failed in function_enter: ValueError: kaput; detached"
    ]
    assert not session.active and current_session() is None
    assert rec.shutdowns == 1
    detach()
    assert rec.shutdowns == 1


def test_async_coroutines(backend: str) -> None:
    import asyncio

    require(backend, EventMask.ENTER_LEAVE | EventMask.ENABLE_SHADOW_STACK)

    async def child(i: int) -> int:
        await asyncio.sleep(0)
        return i

    async def parent() -> int:
        return sum(await asyncio.gather(child(1), child(2)))

    rec, result = run(
        backend,
        EventMask.ENTER_LEAVE | EventMask.ENABLE_SHADOW_STACK,
        lambda: asyncio.run(parent()),
    )
    assert result == 3
    kids = rec.calls({"test_async_coroutines.<locals>.child"})
    assert [e[0] for e in kids].count("enter") == 2
    assert [e[0] for e in kids].count("leave") == 2
    assert [e[0] for e in kids].count("yield") == [e[0] for e in kids].count("resume") >= 2


def assert_paired(events: list[tuple[object, ...]]) -> None:
    """Per function: never more leaves than enters, never a resume without a yield."""
    depth: dict[object, int] = {}
    suspended: dict[object, int] = {}
    for kind, name, *_ in (e for e in events if len(e) >= 2):
        if kind == "enter":
            depth[name] = depth.get(name, 0) + 1
        elif kind == "leave":
            depth[name] = depth.get(name, 0) - 1
            assert depth[name] >= 0, f"leave without enter: {name}"
        elif kind == "yield":
            suspended[name] = suspended.get(name, 0) + 1
        elif kind == "resume":
            suspended[name] = suspended.get(name, 0) - 1
            assert suspended[name] >= 0, f"resume without yield: {name}"


def recursive_attach(n: int, backend: str, rec: Recorder) -> int:
    if n == 0:
        attach(rec, backend)
        return 0
    return recursive_attach(n - 1, backend, rec) + 1


def test_frames_running_at_attach_never_leave_unpaired(backend: str) -> None:
    rec = Recorder(EventMask.ENTER_LEAVE)
    recursive_attach(3, backend, rec)  # returns through frames entered before attach
    recursive_attach_after = recursive_attach.__code__  # noqa: F841
    middle(1)
    detach()
    names = {e[1] for e in rec.events if e[0] in ("enter", "leave")}
    assert "recursive_attach" not in names
    assert_paired([e for e in rec.events if e[0] in ("enter", "leave", "yield", "resume")])
    assert ("enter", "middle") in rec.events


def test_everything_paired_under_load(backend: str) -> None:
    import asyncio

    def work() -> None:
        list(gen(3))
        catcher()
        t = threading.Thread(target=lambda: [middle(i) for i in range(5)])
        t.start()
        t.join()

        async def co() -> int:
            await asyncio.sleep(0)
            return 1

        asyncio.run(co())

    rec, _ = run(backend, EventMask.ENTER_LEAVE, work)
    assert_paired(rec.events)


def test_shadow_stack_semantics(backend: str) -> None:
    """Generators are on the stack only while running; unwound frames are gone; other threads."""
    require(backend, EventMask.ENTER_LEAVE | EventMask.ENABLE_SHADOW_STACK)
    captured: dict[str, tuple[str, ...]] = {}
    session_box: list[object] = []

    def names() -> tuple[str, ...]:
        info = session_box[0].info  # type: ignore[attr-defined]
        stack = info.get_shadow_stack(threading.get_ident())
        got = tuple(info.get_function_info(f).name.rsplit(".", 1)[-1] for f in stack)
        assert got[-1] == "names"  # the caller of get_shadow_stack is on top
        return got[:-1]

    def inner_gen():  # type: ignore[no-untyped-def]
        captured["in_gen"] = names()
        yield 1
        captured["in_gen_again"] = names()
        yield 2

    def consumer() -> None:
        g = inner_gen()
        next(g)
        captured["between"] = names()
        next(g)
        try:
            thrower()
        except ValueError:
            captured["after_unwind"] = names()

    def thrower() -> None:
        captured["in_thrower"] = names()
        raise ValueError

    rec = Recorder(EventMask.ENTER_LEAVE | EventMask.ENABLE_SHADOW_STACK)
    session_box.append(attach(rec, backend))
    consumer()
    detach()
    assert captured["in_gen"][-2:] == ("consumer", "inner_gen")
    assert captured["in_gen_again"][-2:] == ("consumer", "inner_gen")
    assert captured["between"][-1] == "consumer"
    assert captured["in_thrower"][-2:] == ("consumer", "thrower")
    assert captured["after_unwind"][-1] == "consumer"


def test_request_profiler_detach_from_callback(backend: str) -> None:
    class Once(Recorder):
        def function_enter(self, fid: int) -> None:  # type: ignore[override]
            super().function_enter(fid)
            assert self.info is not None
            self.info.request_profiler_detach()

        def profiler_detach_succeeded(self) -> None:
            self.add("detached")

    rec = Once(EventMask.ENTER_LEAVE)
    attach(rec, backend)
    middle(1)
    middle(2)
    assert current_session() is None
    assert [e[0] for e in rec.events] == ["enter", "detached", "shutdown"]


def test_set_function_events_overrides_filter(backend: str) -> None:
    rec = Recorder(EventMask.ENTER_LEAVE | EventMask.FIRST_EXECUTION, filter=lambda fi: False)
    session = attach(rec, backend)
    middle(1)  # rejected, but its id is born
    info = session.info
    (fid,) = [f for f in list(info.functions.codes) if info.get_function_info(f).name == "middle"]  # type: ignore[arg-type]
    info.set_function_events(fid, EventMask.ENTER_LEAVE)  # type: ignore[arg-type]
    middle(1)
    detach()
    assert rec.calls({"middle", "leaf"}) == [("enter", "middle"), ("leave", "middle")]


def test_coexists_with_cprofile(backend: str) -> None:
    import cProfile
    import pstats

    rec = Recorder(EventMask.ENTER_LEAVE)
    attach(rec, backend)
    prof = cProfile.Profile()
    prof.enable()
    middle(1)
    prof.disable()
    middle(2)
    detach()
    stats = pstats.Stats(prof)
    assert any(func[2] == "middle" for func in stats.stats)  # type: ignore[attr-defined]
    if backend == "monitoring":  # separate tool ids: both see everything
        assert rec.calls({"middle"}).count(("enter", "middle")) == 2


def test_monitoring_refused_when_tool_ids_taken() -> None:
    import pytest

    from profkit.collect.select import choose

    mon = getattr(sys, "monitoring", None)
    if mon is None:
        pytest.skip("sys.monitoring needs 3.12+")
    taken = [t for t in range(6) if mon.get_tool(t) is None]
    for tool in taken:
        mon.use_tool_id(tool, "test-squatter")
    try:
        choice = choose("auto", EventMask.ENTER_LEAVE)
        assert choice.name == "setprofile"
        assert "tool ids" in choice.reason
    finally:
        for tool in taken:
            mon.free_tool_id(tool)


def bottomless(n: int) -> int:
    return bottomless(n + 1)


def test_recursion_limit_is_the_programs(backend: str, capsys) -> None:  # type: ignore[no-untyped-def]
    """Hitting the recursion limit under profiling: the program gets its RecursionError,
    profkit prints nothing and does not detach."""
    import pytest

    rec = Recorder(EventMask.ENTER_LEAVE)
    session = attach(rec, backend)
    with pytest.raises(RecursionError):
        bottomless(0)
    assert session.active
    assert capsys.readouterr().err == ""
    detach()
    if backend == "monitoring":
        # setprofile: the interpreter itself unsets a profile function it could not call
        # at the limit, so that thread is no longer traced (docs/api.md).
        assert_paired(rec.events)
        # Only bottomless: another thread (xdist's) may be inside a function at detach.
        calls = rec.calls({"bottomless"})
        assert calls.count(("enter", "bottomless")) == calls.count(("leave", "bottomless")) > 100


def attach_detach_inside(backend: str) -> None:
    attach(Recorder(EventMask.ENTER_LEAVE | EventMask.EXCEPTIONS), backend)
    middle(1)
    detach()


def test_nothing_left_behind(backend: str) -> None:
    attach_detach_inside(backend)
    mon = getattr(sys, "monitoring", None)
    if mon is not None:
        for code in (attach_detach_inside.__code__, middle.__code__, leaf.__code__):
            assert all(mon.get_local_events(t, code) == 0 for t in range(6))
        assert all(mon.get_tool(t) is None for t in (3, 4))
    assert sys.getprofile() is None
    assert threading.Thread._bootstrap_inner.__module__ == "threading"
    assert not any(type(f).__name__ == "ImportWatcher" for f in sys.meta_path)


def ctrl_c_lands_here() -> None:
    pass


class InterruptsOnEnter(Recorder):
    """A profiler whose callback raises KeyboardInterrupt: once the program runs, nothing tells
    that from a Ctrl-C landing inside the callback, so it is the program's."""

    def function_enter(self, fid: int) -> None:  # type: ignore[override]
        super().function_enter(fid)
        if self.name(fid) == "ctrl_c_lands_here":
            raise KeyboardInterrupt


def test_a_callbacks_keyboard_interrupt_reaches_the_running_program(backend: str) -> None:
    import pytest

    rec = InterruptsOnEnter(EventMask.ENTER_LEAVE)
    attach(rec, backend)
    try:
        with pytest.raises(KeyboardInterrupt):
            ctrl_c_lands_here()
        session = current_session()
        assert session is not None and session.active  # not taken for a failure
    finally:
        detach()
