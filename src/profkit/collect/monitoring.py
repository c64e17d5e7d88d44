"""The ``sys.monitoring`` backend (Python 3.12+): the fast tracing collector.

Two tool ids are used (PEP 669; which ones, and how one is given up when the program
claims it, is ``profkit/_toolids.py``'s):

* the *discovery* tool has one global ``PY_START`` callback. It sees a code object's
  first call, registers it (``function_first_execution``), asks the filter, and answers
  ``DISABLE`` so that location never reports to it again. Rejected code therefore runs at
  full speed; accepted code gets local events on the other tool, and its first call is
  delivered by the discovery callback itself (local events set during an event only
  take effect from the next one; checked on 3.12 and 3.13).
* the *main* tool has local events (``PY_START``/``PY_RETURN``/``PY_YIELD``/``PY_RESUME``,
  ``CALL``/``C_RETURN``/``C_RAISE`` for transitions) on accepted code only, so its hot
  callbacks need no membership test: ``id(code)`` plus the profiler's bound method. The
  events that cannot be local (``PY_UNWIND``, ``PY_THROW``, ``RAISE``, ``RERAISE``,
  ``EXCEPTION_HANDLED``) are global and test membership, which is fine as exceptions are rare.

If two threads make the very first call of a function at the same moment, the second may
already be past the point where the new local events could apply to it: that one call is
then reported by its leave only. (No pure-Python fix: it would need per-event state.)

Frames already running at attach would report a return without a call. Their code
objects are found with ``sys._current_frames()`` and handled by a slower path that
delivers a leave only for frames it saw enter, so enter/leave always pair up.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import CodeType

from profkit._toolids import ClaimWatcher, free_ids, transplant
from profkit.collect.base import Capabilities
from profkit.collect.context import BackendContext
from profkit.collect.hot_monitoring import ALL_MONITORING_EVENTS, main_callbacks
from profkit.collect.idtables import GENERATOR_FLAGS
from profkit.collect.plan import ALL_EVENTS
from profkit.collect.transitions import arguments_of

TYPE_CHECKING = False  # typing's, without importing typing at run time (profkit run's start-up)
if TYPE_CHECKING:
    from typing import Any

#: ``sys.monitoring`` (3.12+), bound once; typed Any so mypy at 3.11 accepts it.
MON: Any = getattr(sys, "monitoring", None)

CAPABILITIES = Capabilities(
    events=ALL_EVENTS,
    cheap_filter=True,
    all_threads=True,
    full_exceptions=True,
)


def reason_unavailable() -> str | None:
    """Why this backend cannot run here, or None."""
    mon = MON
    if mon is None:
        return "sys.monitoring needs Python 3.12+"
    if len(free_ids()) < 2:
        return "fewer than two sys.monitoring tool ids are free"
    return None


class MonitoringBackend:
    """PEP 669 collector; see the module docstring for the two-tool design."""

    name = "monitoring"
    capabilities = CAPABILITIES

    def __init__(self, ctx: BackendContext) -> None:
        self.ctx = ctx
        self.tools: tuple[int, int] | None = None
        #: code id → the token of the call that enabled it: the code ids with local events
        #: on the main tool. Claimed with ``setdefault`` rather than a lock, which a
        #: thread could hold across the program's ``fork()`` (the child would hang).
        self.enabled: dict[int, object] = {}
        self.local_events = 0
        self.pre_codes: set[int] = set()  #: code ids running at attach (slow path)
        self.pre_frames: set[int] = set()  #: frames of those codes entered after attach
        #: moves our tool off an id the program claims (``_toolids.py``)
        self._watcher = ClaimWatcher(lambda: self.tools or (), self._move)

    # -- lifecycle -------------------------------------------------------------------
    def start(self) -> None:
        """Claim two tool ids and arm the events the plan needs."""
        mon = MON
        free = free_ids()[:2]
        if len(free) < 2:
            raise RuntimeError("profkit: no free sys.monitoring tool ids")
        disc, main = free
        mon.use_tool_id(disc, "profkit-discovery")
        mon.use_tool_id(main, "profkit")
        self.tools = (disc, main)
        self._arm()
        self._watcher.install()

    def stop(self) -> None:
        """Release both tool ids (clears their events and callbacks)."""
        self._watcher.uninstall()
        tools, self.tools = self.tools, None
        if tools is None:
            return
        mon = MON
        codes = self.ctx.functions.codes
        for tool, local in ((tools[0], self.pre_codes), (tools[1], self.enabled)):
            mon.set_events(tool, 0)
            # Local events outlive free_tool_id on 3.12/3.13: clear each one we set.
            for code_id in list(local):
                code = codes.get(code_id)
                if code is not None:
                    mon.set_local_events(tool, code, 0)
            for event in ALL_MONITORING_EVENTS:
                mon.register_callback(tool, event, None)
            mon.free_tool_id(tool)
        self.enabled.clear()
        self.pre_codes.clear()
        self.pre_frames.clear()

    def abandon(self) -> None:
        """In a forked child: as :meth:`stop` (nothing of the parent's is torn down)."""
        self.stop()

    #: the tools stay claimed in a forked child; the recorder's callbacks are mute there
    #: until the profiler is reset, and the discovery callbacks only classify code
    resumes_after_fork = True

    def resume_after_fork(self) -> None:
        """In a forked child: nothing to do (the verdicts and local events hold there)."""

    def rearm(self) -> None:
        """Mask or filter changed: forget every verdict and start discovery again."""
        tools = self.tools
        if tools is None:
            return
        self.stop()
        mon = MON
        mon.use_tool_id(tools[0], "profkit-discovery")
        mon.use_tool_id(tools[1], "profkit")
        self.tools = tools
        self._arm()
        mon.restart_events()
        self._watcher.install()

    def _move(self, tool: int, spare: int) -> None:
        """The program claims our ``tool``: carry on from ``spare`` (already claimed)."""
        tools = self.tools
        if tools is None:
            return
        disc, main = tools
        codes = self.ctx.functions.codes
        armed = self.pre_codes if tool == disc else self.enabled
        armed_codes = [codes[c] for c in list(armed) if c in codes]
        transplant(tool, spare, ALL_MONITORING_EVENTS, armed_codes)
        self.tools = (spare, main) if tool == disc else (disc, spare)

    # -- wiring ----------------------------------------------------------------------
    def _arm(self) -> None:
        assert self.tools is not None
        disc, main = self.tools
        mon = MON
        ev = mon.events
        ctx = self.ctx
        plan = ctx.plan
        wants_calls = plan.tracks_calls
        local = 0
        # Each event only if a bound callback needs it: a profiler without
        # function_yield/function_resume pays nothing per generator suspension.
        if plan.enter or plan.arguments:
            local |= ev.PY_START
        if plan.leave or plan.return_value:
            local |= ev.PY_RETURN
        if plan.yield_:
            local |= ev.PY_YIELD
        if plan.resume:
            local |= ev.PY_RESUME
        if plan.wants_transitions:
            local |= ev.CALL | ev.C_RETURN | ev.C_RAISE
        self.local_events = local
        callbacks = main_callbacks(ctx, self.enabled, self.pre_codes, self.pre_frames)
        for event, fn in callbacks.items():
            mon.register_callback(main, event, fn)
        global_events = 0
        if plan.leave or plan.unwind:
            global_events |= ev.PY_UNWIND
        if plan.resume:
            global_events |= ev.PY_THROW
        if plan.wants_exceptions:
            global_events |= ev.RAISE | ev.RERAISE | ev.EXCEPTION_HANDLED
        self.pre_codes.clear()
        self.pre_frames.clear()
        if wants_calls:
            self.pre_codes.update(_running_codes(ctx))
        pre = self.pre_codes
        start, pre_return = _discovery_callbacks(ctx, self)
        mon.register_callback(disc, ev.PY_START, start)
        mon.register_callback(disc, ev.PY_RETURN, pre_return)
        for code_id in pre:
            mon.set_local_events(disc, ctx.functions.codes[code_id], ev.PY_RETURN)
        if local or plan.first_execution is not None or plan.wants_exceptions:
            mon.set_events(disc, ev.PY_START)
        mon.set_events(main, global_events)

    def enable(self, code: CodeType) -> None:
        """Give an accepted code object its local events on the main tool."""
        tools = self.tools
        if tools is not None and self.local_events:
            MON.set_local_events(tools[1], code, self.local_events)


def _running_codes(ctx: BackendContext) -> set[int]:
    """Non-generator code objects on any thread's stack now (their returns need care)."""
    out: set[int] = set()
    for frame in sys._current_frames().values():
        f: Any = frame
        while f is not None:
            code = f.f_code
            if not code.co_flags & GENERATOR_FLAGS:
                ctx.functions.add_code(code)
                out.add(id(code))
            f = f.f_back
    return out


def _discovery_callbacks(
    ctx: BackendContext, backend: MonitoringBackend
) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """The discovery tool's PY_START and the PY_RETURN of code running at attach."""
    disable = MON.DISABLE
    discover = ctx.discover
    enabled = backend.enabled
    plan = ctx.plan
    enter, arguments, leave = plan.enter, plan.arguments, plan.leave
    return_value = plan.return_value
    fail = ctx.fail
    getframe = sys._getframe
    pre, pre_frames = backend.pre_codes, backend.pre_frames
    wants_calls = plan.tracks_calls

    def deliver_enter(code: CodeType, fid: int) -> None:
        try:
            if enter is not None:
                enter(fid)
            if arguments is not None:
                arguments(fid, arguments_of(getframe(2)))
        except RecursionError:
            pass
        except BaseException as exc:
            fail(exc, "function_enter")

    def on_start(code: CodeType, offset: int) -> Any:
        fid, ok = discover(code)
        if fid in pre:
            if ok and wants_calls:
                pre_frames.add(id(getframe(1)))
                deliver_enter(code, fid)
            return None
        if ok and fid not in enabled:
            token = object()  # two threads may make the first call at once: one wins
            if enabled.setdefault(fid, token) is token:
                backend.enable(code)
                if wants_calls:
                    deliver_enter(code, fid)
        return disable

    def on_pre_return(code: CodeType, offset: int, value: object) -> Any:
        frame_id = id(getframe(1))
        if frame_id in pre_frames:
            pre_frames.discard(frame_id)
            try:
                if return_value is not None:
                    return_value(id(code), value)
                if leave is not None:
                    leave(id(code))
            except RecursionError:
                pass
            except BaseException as exc:
                fail(exc, "function_leave")
        return None

    return on_start, on_pre_return
