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
