"""The C recorder (``csrc/*.c``): the same trees as the pure Python path, and the failure rule.

The conftest runs every ELT test on both paths; these tests compare the two directly on
arbitrary event sequences (including leaves that match nothing or a deeper frame, which
the collector can deliver around attach and after a missed leave), and check what only
the C side has: the ``sys.monitoring``-shaped methods, errors that must never escape into
the profiled program, thread bookkeeping, and the build itself.
"""

from __future__ import annotations

import gc
import os
import sys
import threading
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from profkit.api.ids import FunctionId
from profkit.calltree.model import CallProfile
from profkit.collect.hot_monitoring import monitoring_form
from profkit.errors import SettingsError
from profkit.profilers.elt import EltProfiler, native
from profkit.settings import Settings
from tests.profilers.elt.fake import FakeClock, FakeDriver

pytestmark = pytest.mark.skipif(not native.available(), reason="the C recorder is not built")


@pytest.fixture(autouse=True)
def hot_path() -> str:
    """These tests pick their paths themselves (overrides the conftest's both-ways run)."""
    return "native"


def _profiles(events: list[tuple[str, int, int]], basetime: int) -> tuple[CallProfile, CallProfile]:
    """Drive the same (kind, function, ns before) events through both hot paths."""
    out = []
    for use_native in (True, False):
        clock = FakeClock()
        prof = EltProfiler(
            Settings(basetime_ns=basetime, native="auto" if use_native else "off"),
            clock=clock,
            standalone=False,
        )
        d = FakeDriver(prof, clock)
        assert (prof._recorder is not None) == use_native
        names = [f"app.f{i}" for i in range(6)]
        for kind, which, before in events:
            clock.advance(before)
            getattr(d, kind)(names[which])
        prof.shutdown()
        assert prof.profile is not None
        out.append(prof.profile)
    return out[0], out[1]


@settings(max_examples=200, deadline=None)
@given(
    events=st.lists(
        st.tuples(
            st.sampled_from(["enter", "leave", "resume", "yield_"]),
            st.integers(0, 5),
            st.integers(0, 50),
        ),
        max_size=60,
    ),
    basetime=st.sampled_from([0, 1, 40]),
)
def test_same_profile_as_pure_python_for_any_event_sequence(
    events: list[tuple[str, int, int]], basetime: int
) -> None:
    fast, slow = _profiles(events, basetime)
    assert fast.frames == slow.frames
    assert [(t.thread_id, t.name, t.root) for t in fast.threads] == [
        (t.thread_id, t.name, t.root) for t in slow.threads
    ]
    assert fast.metadata["open_calls_closed_at_end"] == slow.metadata["open_calls_closed_at_end"]


def _recorder(**kwargs: Any) -> Any:
    assert native.Recorder is not None
    return native.Recorder(lambda: ("t", "T"), **kwargs)


def test_deep_recursion_exports_without_recursing() -> None:
    clock = iter(range(10**9))
    rec = _recorder(clock=lambda: next(clock))
    for _ in range(20_000):
        rec.enter(7)
    for _ in range(20_000):
        rec.leave(7)
    closed, threads = rec.export(10**9)
    assert closed == 0
    ((token, rows),) = threads
    assert token == ("t", "T") and len(rows) == 20_001
    root = native.tree_of(rows)
    depth, node = 0, root
    while node.children:
        (node,) = node.children.values()
        depth += 1
        assert node.calls == 1
    assert depth == 20_000


def test_nodes_are_found_again_after_the_node_table_grew_many_times() -> None:
    """The node table keeps a node number and a few bits of its hash a slot (fewer at
    each size), and is rebuilt from the nodes when it grows (3/4 full): every node of
    60,000 (parent, fid) pairs, made across ten growths, must be found again, not made
    twice."""
    clock = iter(range(10**9))
    rec = _recorder(clock=lambda: next(clock))
    for _ in range(2):
        for parent in range(1, 301):
            rec.enter(parent)
            for fid in range(200):
                rec.enter(parent * 1000 + fid)
                rec.leave(parent * 1000 + fid)
            rec.leave(parent)
    closed, ((_, rows),) = rec.export(10**9)
    assert closed == 0 and len(rows) == 1 + 300 + 300 * 200
    root = native.tree_of(rows)
    assert all(child.calls == 2 for child in root.children.values())
    assert all(n.calls == 2 for c in root.children.values() for n in c.children.values())


def test_open_calls_are_closed_and_counted_by_export() -> None:
    now = [0]
    rec = _recorder(clock=lambda: now[0])
    rec.enter(1)
    now[0] = 5
    rec.enter(2)
    closed, ((_, rows),) = rec.export(25)
    assert closed == 2
    root = native.tree_of(rows)
    assert root.children[1].incl == 25 and root.children[1].children[2].incl == 20


def test_monitoring_form_is_offered_for_enter_and_leave_only() -> None:
    rec = _recorder()
    errors: list[tuple[BaseException, str]] = []

    def fail(exc: BaseException, where: str) -> None:
        errors.append((exc, where))

    assert monitoring_form(rec.enter, fail).__name__ == "py_start"  # hooks.c's form of it
    assert monitoring_form(rec.leave, fail).__name__ == "py_return"
    assert monitoring_form(rec.export, fail) is None
    assert monitoring_form(None, fail) is None
    assert monitoring_form(print, fail) is None


def test_monitoring_shaped_calls_use_id_of_code() -> None:
    now = [0]
    rec = _recorder(clock=lambda: now[0])
    code = test_monitoring_shaped_calls_use_id_of_code.__code__
    rec.py_start(code, 0)
    now[0] = 9
    rec.py_return(code, 4, None)
    _, ((_, rows),) = rec.export(10)
    assert native.tree_of(rows).children[id(code)].incl == 9


def test_errors_in_monitoring_callbacks_go_to_on_error_not_the_program() -> None:
    def broken_thread() -> object:
        raise ZeroDivisionError("new_thread broke")

    rec = native.Recorder(broken_thread)  # type: ignore[misc]
    errors: list[tuple[str, str]] = []
    start = rec.__profkit_monitoring__(
        "enter", lambda exc, where: errors.append((type(exc).__name__, where))
    )
    code = broken_thread.__code__
    assert start(code, 0) is None  # nothing raised into the "program"
    assert rec.py_return(code, 0, None) is None
    assert errors == [
        ("ZeroDivisionError", "function_enter"),
        ("ZeroDivisionError", "function_leave"),
    ]
    with pytest.raises(ZeroDivisionError):  # the id-shaped form raises: its caller decides
        rec.enter(1)


def test_without_on_error_the_failure_goes_to_the_unraisable_hook() -> None:
    def broken_thread() -> object:
        raise ZeroDivisionError("boom")

    rec = native.Recorder(broken_thread)  # type: ignore[misc]
    seen: list[Any] = []
    old = sys.unraisablehook
    sys.unraisablehook = seen.append
    try:
        assert rec.py_start(broken_thread.__code__, 0) is None
    finally:
        sys.unraisablehook = old
    assert len(seen) == 1 and isinstance(seen[0].exc_value, ZeroDivisionError)


def test_an_exception_the_failure_rule_reraises_reaches_the_program() -> None:
    """Session.fail re-raises what the program's own signal handler raised (KeyboardInterrupt)."""

    def interrupted() -> object:
        raise KeyboardInterrupt

    rec = native.Recorder(interrupted)  # type: ignore[misc]

    def fail(exc: BaseException, where: str) -> None:
        raise exc

    start = rec.__profkit_monitoring__("enter", fail)
    with pytest.raises(KeyboardInterrupt):
        start(interrupted.__code__, 0)


def test_throwaway_threads_are_asked_again_and_silent_ones_never() -> None:
    answers: list[object] = [False, False, ("main", "M")]
    asked: list[int] = []

    def new_thread() -> object:
        asked.append(1)
        return answers.pop(0)

    rec = native.Recorder(new_thread)  # type: ignore[misc]
    rec.enter(1)  # throwaway
    rec.leave(1)  # throwaway
    rec.enter(2)  # recorded
    rec.leave(2)
    assert len(asked) == 3
    rec.quiet_this_thread()
    rec.enter(3)
    rec.leave(3)
    _, exported = rec.export(0)
    ((token, rows),) = exported
    assert token == ("main", "M") and set(native.tree_of(rows).children) == {2}

    silent_asks: list[int] = []

    def silent() -> object:
        silent_asks.append(1)
        return None

    quiet = native.Recorder(silent)  # type: ignore[misc]
    for _ in range(3):
        quiet.enter(1)
        quiet.leave(1)
    assert len(silent_asks) == 1 and quiet.export(0) == (0, [])


def test_each_thread_gets_its_own_tree_in_creation_order() -> None:
    rec = native.Recorder(lambda: threading.current_thread().name)  # type: ignore[misc]
    rec.enter(1)

    def work(fid: int) -> None:
        rec.enter(fid)
        rec.leave(fid)

    for n in (10, 11):
        t = threading.Thread(target=work, args=(n,), name=f"W{n}")
        t.start()
        t.join()
    rec.leave(1)
    _, exported = rec.export(0)
    assert [token for token, _ in exported] == [threading.current_thread().name, "W10", "W11"]
    assert [set(native.tree_of(rows).children) for _, rows in exported] == [{1}, {10}, {11}]


def test_a_new_recorder_never_reuses_a_dead_ones_threads() -> None:
    first = _recorder()
    first.enter(1)
    del first
    gc.collect()
    second = native.Recorder(lambda: "second")  # type: ignore[misc]
    second.enter(2)
    second.leave(2)
    _, ((token, rows),) = second.export(0)
    assert token == "second" and set(native.tree_of(rows).children) == {2}


def test_two_live_recorders_keep_separate_stacks_on_one_thread() -> None:
    a, b = native.Recorder(lambda: "a"), native.Recorder(lambda: "b")  # type: ignore[misc]
    a.enter(1)
    b.enter(2)
    a.leave(1)
    b.leave(2)
    assert native.tree_of(a.export(0)[1][0][1]).children[1].calls == 1
    assert native.tree_of(b.export(0)[1][0][1]).children[2].calls == 1


def test_bad_arguments_are_type_errors() -> None:
    with pytest.raises(TypeError):
        native.Recorder(42)  # type: ignore[misc]
    rec = _recorder()
    with pytest.raises(TypeError):
        rec.enter()
    with pytest.raises(TypeError):
        rec.enter("f")


def test_native_on_without_a_build_is_a_clear_settings_error(monkeypatch: Any) -> None:
    monkeypatch.setattr(native, "Recorder", None)
    with pytest.raises(SettingsError, match="PROFKIT_NATIVE=on"):
        EltProfiler(Settings(native="on"), standalone=False)
    assert not native.wanted("auto")


def test_native_is_used_with_the_real_clock_and_times_compare() -> None:
    prof = EltProfiler(Settings(), standalone=False)
    d = FakeDriver(prof, FakeClock())
    assert prof._recorder is not None
    d.enter("app.main")
    d.leave("app.main")
    prof.shutdown()
    assert prof.profile is not None
    (thread,) = prof.profile.threads
    duration = prof.profile.metadata["duration_ns"]
    assert 0 <= thread.root.inclusive_ns <= duration


@pytest.mark.skipif(
    os.environ.get("PROFKIT_REQUIRE_NATIVE") != "1", reason="only where the build is required"
)
def test_the_build_is_present_where_it_is_required() -> None:
    assert native.available(), "PROFKIT_REQUIRE_NATIVE=1 but the C recorder did not build"


def test_function_id_is_the_code_address() -> None:
    rec = _recorder()
    fid = FunctionId(id(test_function_id_is_the_code_address.__code__))
    rec.enter(fid)
    rec.leave(fid)
    _, ((_, rows),) = rec.export(0)
    assert fid in native.tree_of(rows).children


@settings(max_examples=200, deadline=None)
@given(
    events=st.lists(
        st.tuples(st.sampled_from(["enter", "leave"]), st.integers(1, 6), st.integers(0, 50)),
        max_size=60,
    ),
    frames=st.lists(st.integers(0, 3), min_size=6, max_size=6),
    basetime=st.sampled_from([0, 1, 40]),
)
def test_flat_export_is_the_general_conversion(
    events: list[tuple[str, int, int]], frames: list[int], basetime: int
) -> None:
    """export_flat (C: merge functions sharing a frame, prune, self times, frame order)
    builds what export + tree.convert build, also when several functions share a frame."""
    assert_flat_export_is_the_general_conversion(events, basetime, frames, end_after=7)


def assert_flat_export_is_the_general_conversion(
    events: list[tuple[str, int, int]], basetime: int, frames: list[int], end_after: int
) -> None:
    """Two recorders fed ``events`` (kind, fid, ns before it); ended ``end_after`` ns after
    the last: export_flat's trees equal export() + tree.convert's (also test_native_wide)."""
    from profkit.calltree.model import Frame
    from profkit.profilers.elt.flat import tree
    from profkit.profilers.elt.tree import convert

    made = []
    now = [0]
    for _ in range(2):
        now[0] = 0
        rec = _recorder(clock=lambda: now[0], basetime_ns=basetime)
        for kind, fid, before in events:
            now[0] += before
            getattr(rec, kind)(fid)
        made.append(rec)
    fast, slow = CallProfile("trace"), CallProfile("trace")

    def frame_of(fid: int) -> Frame:
        return Frame(f"app.f{frames[fid - 1]}")

    end = now[0] + end_after
    closed, flat_threads = made[0].export_flat(end, lambda f: fast.frame_id(frame_of(f)))
    closed2, exported = made[1].export(end)
    assert closed == closed2
    general = [
        convert(native.tree_of(rows), slow, frame_of, root_totals=False) for _, rows in exported
    ]
    assert [tree(data) for _, data in flat_threads] == [t for t in general if t.children]
    assert fast.frames == slow.frames


def test_flat_rows_save_as_the_file_module_saves(tmp_path: Any) -> None:
    """The saver writes a pristine tree's rows through rows_json: the same bytes as
    calltree.file.save writes from the nodes (which are made by reading them)."""
    from profkit.calltree import file, stream_writer

    clock = FakeClock()
    prof = EltProfiler(Settings(), clock=clock, standalone=False)
    d = FakeDriver(prof, clock)
    for i in range(30):
        with d.call("app.main", before=3):
            d.leaf(f"app.f{i % 4}", 10 + i)
            with d.call("app.g", after=2):
                d.leaf("app.f1", 5)
    prof.shutdown()
    assert prof.profile is not None
    stream_writer.save(prof.profile, tmp_path / "stream.json")
    file.save(prof.profile, tmp_path / "file.json")  # reads every node
    stream_writer.save(prof.profile, tmp_path / "read.json")  # no longer pristine
    data = (tmp_path / "file.json").read_bytes()
    assert (tmp_path / "stream.json").read_bytes() == data
    assert (tmp_path / "read.json").read_bytes() == data
    assert file.load(tmp_path / "stream.json").threads[0].root == prof.profile.threads[0].root


def test_flat_export_merges_the_children_of_merged_functions() -> None:
    """Two functions with one frame (ids 1 and 2) each call function 3: after the merge,
    frame 3 is one child, not two (a saved file would name it twice under one parent)."""
    from profkit.calltree.model import Frame
    from profkit.profilers.elt.flat import counts, tree

    now = [0]
    rec = _recorder(clock=lambda: now[0])
    for outer in (1, 2):
        rec.enter(outer)
        rec.enter(3)
        now[0] += 5
        rec.leave(3)
        rec.leave(outer)
    profile = CallProfile("trace")
    names = {1: "app.same", 2: "app.same", 3: "app.callee"}
    _, ((_, data),) = rec.export_flat(now[0], lambda f: profile.frame_id(Frame(names[f])))
    root = tree(data)
    (same,) = root.children.values()
    (callee,) = same.children.values()
    assert (same.calls, same.inclusive_ns, callee.calls, callee.inclusive_ns) == (2, 10, 2, 10)
    assert counts(data) == (3, 0)


def test_report_self_times_from_the_rows_match_the_nodes() -> None:
    """The end-of-run hot spots come from the recorder's rows (no node made): the same
    numbers as from the nodes, and reading them leaves the tree pristine for the saver."""
    from profkit.report.shown import Hiding, self_times
    from profkit.report.text import render_tree

    clock = FakeClock()
    prof = EltProfiler(Settings(), clock=clock, standalone=False)
    d = FakeDriver(prof, clock)
    for i in range(30):
        with d.call("app.main", before=3):
            d.leaf(f"app.f{i % 4}", 10 + i)
            with d.call("app.glue", after=2):
                d.leaf("app.f1", 5)
                with d.call("app.g", after=1):
                    d.leaf("app.f2", 7)
    prof.shutdown()
    assert prof.profile is not None
    profile = prof.profile
    root = profile.threads[0].root
    hidden = [f.name == "app.glue" for f in profile.frames]
    hiding = Hiding(len(profile.frames), hidden)
    assert root.flat_columns() is not None  # type: ignore[attr-defined]
    from_rows = self_times(root, hiding)
    text = render_tree(profile, hot_spots=3)
    assert root.flat_columns() is None  # type: ignore[attr-defined]  # nodes made now
    assert self_times(root, hiding) == from_rows
    assert "app.glue" in text and "app.f2" in text
    by_name = {profile.frames[f].name: t for f, t in from_rows.items()}
    assert by_name["app.main"] == 30 * (3 + 2)  # its own, and app.glue's (hidden)


def test_the_extension_exports_only_its_init_function() -> None:
    """The recorder's units share their functions (``ELT_HIDDEN`` in native.h); the built
    module exports ``PyInit__native`` alone, so none can clash with another extension's."""
    from profkit.profilers.elt import _native  # type: ignore[attr-defined]
    from tests.clr.test_exports import exported

    assert exported(_native.__file__) == {"PyInit__native"}
