"""What a profiled program can see of profkit (#17): the tool ids it leaves free on
``sys.monitoring``, and the profile function it shows on ``setprofile``."""

from __future__ import annotations

import cProfile
import pstats
import sys
from typing import Any

import pytest

from profkit.api import EventMask
from profkit.collect import _pyhook, attach, detach, setprofile
from tests.collect.recording import Recorder

MON: Any = getattr(sys, "monitoring", None)
needs_monitoring = pytest.mark.skipif(MON is None, reason="sys.monitoring needs 3.12+")


def pk_leaf(x: int = 0) -> int:
    return x + 1


def _profkit_tools() -> list[int]:
    return [t for t in range(6) if (MON.get_tool(t) or "").startswith("profkit")]


@needs_monitoring
def test_the_debugger_coverage_and_profiler_ids_stay_free() -> None:
    rec = Recorder(EventMask.ENTER_LEAVE)
    attach(rec, "monitoring")
    try:
        assert _profkit_tools() == [3, 4]
        assert [MON.get_tool(t) for t in (0, 1, 2, 5)] == [None] * 4
        prof = cProfile.Profile()  # 3.12+: sys.monitoring.PROFILER_ID
        prof.enable()
        pk_leaf(1)
        prof.disable()
    finally:
        detach()
    names = {f[2] for f in pstats.Stats(prof).stats}  # type: ignore[attr-defined]
    assert "pk_leaf" in names
    assert ("enter", "pk_leaf") in rec.events
    assert _profkit_tools() == []


@needs_monitoring
def test_when_the_program_holds_3_and_4_the_optimizer_id_goes_first() -> None:
    MON.use_tool_id(3, "program-a")
    MON.use_tool_id(4, "program-b")
    try:
        rec = Recorder(EventMask.ENTER_LEAVE)
        attach(rec, "monitoring")
        try:
            assert _profkit_tools() == [2, 5]
            assert MON.get_tool(0) is None and MON.get_tool(1) is None
            pk_leaf(1)
        finally:
            detach()
        assert ("enter", "pk_leaf") in rec.events
    finally:
        MON.free_tool_id(3)
        MON.free_tool_id(4)


@pytest.mark.parametrize("native", [True, False])
def test_getprofile_shows_the_dispatcher_and_none_after_detach(native: bool) -> None:
    attach(Recorder(EventMask.ENTER_LEAVE), "setprofile", native=native)
    try:
        hook = sys.getprofile()
    finally:
        detach()
    if native and setprofile._profhook is not None:
        assert isinstance(hook, setprofile._profhook.Hook)
    else:
        assert getattr(hook, "__module__", None) == _pyhook.__name__
    assert sys.getprofile() is None


def pk_outer(tool: int, name: str) -> int:
    MON.use_tool_id(tool, name)  # the program claims profkit's id in the middle of a call
    return pk_leaf(1)


@needs_monitoring
@pytest.mark.parametrize("tool", [4, 3])
def test_a_program_claiming_a_profkit_id_gets_it_and_nothing_is_lost(tool: int) -> None:
    rec = Recorder(EventMask.ENTER_LEAVE)
    attach(rec, "monitoring")
    try:
        pk_leaf(0)  # armed on the main tool before the move
        pk_outer(tool, "program")
        assert MON.get_tool(tool) == "program"
        assert sorted(_profkit_tools()) == sorted({3, 4, 5} - {tool})
        pk_leaf(2)  # already armed: still reported
        new_code = compile("def pk_new():\n    return 1\n", "<test>", "exec")
        ns: dict[str, Any] = {}
        exec(new_code, ns)
        ns["pk_new"]()  # first seen after the move: the discovery tool still works
    finally:
        detach()
        if MON.get_tool(tool) == "program":
            MON.free_tool_id(tool)
    names = [(e[0], e[1]) for e in rec.events if e[0] in ("enter", "leave")]
    assert names.count(("enter", "pk_leaf")) == names.count(("leave", "pk_leaf")) == 3
    assert ("enter", "pk_outer") in names and ("leave", "pk_outer") in names
    assert ("enter", "pk_new") in names and ("leave", "pk_new") in names
    assert _profkit_tools() == []
    assert type(MON.use_tool_id).__name__ == "builtin_function_or_method"


@needs_monitoring
def test_with_no_id_left_the_programs_claim_fails_as_without_profkit() -> None:
    mine = [t for t in (5, 2, 1, 0) if MON.get_tool(t) is None]
    for t in mine:
        MON.use_tool_id(t, "program")
    try:
        attach(Recorder(EventMask.ENTER_LEAVE), "monitoring")
        try:
            with pytest.raises(ValueError):
                MON.use_tool_id(4, "program")
            assert MON.get_tool(4) == "profkit-discovery"  # unchanged
        finally:
            detach()
    finally:
        for t in mine:
            MON.free_tool_id(t)


@needs_monitoring
@pytest.mark.parametrize("first_out", [True, False])
def test_two_watched_holders_share_one_wrapper_in_any_stop_order(first_out: bool) -> None:
    """The collector and the C-call tool both watch their ids: a claim moves whichever
    holds the id, and the real use_tool_id is back only when both have stopped."""
    from profkit._toolids import ClaimWatcher, transplant

    real = MON.use_tool_id
    held = {"a": 4, "b": 5}

    def watcher(key: str) -> ClaimWatcher:
        def move(tool: int, spare: int) -> None:
            transplant(tool, spare, (), ())
            held[key] = spare

        return ClaimWatcher(lambda: (held[key],), move)

    MON.use_tool_id(4, "holder-a")
    MON.use_tool_id(5, "holder-b")
    a, b = watcher("a"), watcher("b")
    a.install()
    b.install()
    b.install()
    try:
        MON.use_tool_id(5, "program")
        assert MON.get_tool(5) == "program" and MON.get_tool(held["b"]) == "holder-b"
        (a if first_out else b).uninstall()
        assert MON.use_tool_id is not real
        (b if first_out else a).uninstall()
        assert MON.use_tool_id is real
    finally:
        a.uninstall()
        b.uninstall()
        for t in {5, held["a"], held["b"]}:
            if MON.get_tool(t) is not None:
                MON.free_tool_id(t)
