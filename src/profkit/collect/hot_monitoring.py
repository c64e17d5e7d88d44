"""The main tool's callbacks for the ``sys.monitoring`` backend: the hot path.

Every closure binds what it needs once (no attribute lookups per event) and does at most
``id(code)`` and the profiler's bound method (the shadow stack costs nothing per event: it
is read from the frames, see ``SessionInfo.get_shadow_stack``). A variant is chosen per plan
so that unused work is absent, not skipped.
``try`` costs nothing on 3.11+ unless it raises, so the failure rule (guarded as
``failure.py`` describes) is free.
"""

from __future__ import annotations

import opcode
import sys
from collections.abc import Callable

from profkit.collect.context import BackendContext
from profkit.collect.plan import Plan
from profkit.collect.transitions import NATIVE_TYPES, arguments_of

TYPE_CHECKING = False  # typing's, without importing typing at run time (profkit run's start-up)
if TYPE_CHECKING:
    from typing import Any

#: ``sys.monitoring`` (3.12+), bound once; typed Any so mypy at 3.11 accepts it.
MON: Any = getattr(sys, "monitoring", None)

_E = MON.events if MON is not None else None
_PUSH_EXC_INFO = opcode.opmap["PUSH_EXC_INFO"]
_POP_EXCEPT = opcode.opmap["POP_EXCEPT"]

#: Every event a tool of ours may have a callback for.
ALL_MONITORING_EVENTS: tuple[int, ...] = (
    tuple(
        getattr(_E, n)
        for n in (
            "PY_START",
            "PY_RETURN",
            "PY_YIELD",
            "PY_RESUME",
            "PY_THROW",
            "PY_UNWIND",
            "CALL",
            "C_RETURN",
            "C_RAISE",
            "RAISE",
            "RERAISE",
            "EXCEPTION_HANDLED",
        )
    )
    if _E is not None
    else ()
)


def main_callbacks(
    ctx: BackendContext, enabled: dict[int, object], pre_codes: set[int], pre_frames: set[int]
) -> dict[int, Callable[..., Any]]:
    """Event → callback for the main tool, specialised to the session's plan."""
    plan = ctx.plan
    out: dict[int, Callable[..., Any]] = {}
    if plan.tracks_calls:
        out.update(_call_callbacks(ctx, enabled, pre_codes, pre_frames))
    if plan.wants_transitions:
        out.update(_transition_callbacks(ctx))
    if plan.wants_exceptions:
        out.update(_exception_callbacks(ctx, enabled))
    return out


def monitoring_form(callback: Callable[..., Any] | None, fail: Callable[..., Any]) -> Any:
    """The ``sys.monitoring``-shaped twin a native hook offers for ``callback``, or None.

    The ``__profkit_monitoring__`` protocol (docs/api.md): when a profiler's id-shaped
    callback (``enter(function_id)``) is a method of an object that implements it,
    ``owner.__profkit_monitoring__(method_name, on_error)`` returns a callable taking the
    interpreter's own arguments (``code, offset[, value]``) that does the same thing for
    ``function_id == id(code)`` and sends its errors to ``on_error`` (the failure rule)
    instead of raising. Registered directly as the callback, it runs with no Python frame
    of ours in between — the CLR's raw ELT hooks (``SetEnterLeaveFunctionHooks3``).
    """
    owner = getattr(callback, "__self__", None)
    offer = getattr(owner, "__profkit_monitoring__", None)
    name = getattr(callback, "__name__", None)
    if offer is None or not isinstance(name, str):
        return None
    return offer(name, fail)


def _call_callbacks(
    ctx: BackendContext, enabled: dict[int, object], pre_codes: set[int], pre_frames: set[int]
) -> dict[int, Callable[..., Any]]:
    """PY_START/PY_RETURN, the generator events and PY_UNWIND for the plan."""
    ev = MON.events
    plan, fail = ctx.plan, ctx.fail
    on_start = _start_callback(plan, fail)
    on_return = _return_callback(plan, fail)
    # -- native hooks replace the closures they can (PY_THROW/PY_UNWIND stay: global) --
    if plan.arguments is None:
        on_start = monitoring_form(plan.enter, fail) or on_start
    if plan.return_value is None:
        on_return = monitoring_form(plan.leave, fail) or on_return
    on_yield, on_resume, on_throw = _generator_callbacks(plan, fail, enabled)
    return {
        ev.PY_START: on_start,
        ev.PY_RETURN: on_return,
        ev.PY_YIELD: on_yield,
        ev.PY_RESUME: on_resume,
        ev.PY_THROW: on_throw,
        ev.PY_UNWIND: _unwind_callback(plan, fail, enabled, pre_codes, pre_frames),
    }


def _start_callback(plan: Plan, fail: Callable[[BaseException, str], None]) -> Callable[..., Any]:
    """PY_START: the common variant (enter only) first, then the general one."""
    enter, arguments = plan.enter, plan.arguments
    idf = id
    getframe = sys._getframe
    if enter is not None and arguments is None:

        def on_start(code: Any, offset: int) -> None:
            try:
                enter(idf(code))
            except RecursionError:
                pass
            except BaseException as exc:
                fail(exc, "function_enter")

        return on_start

    def on_start_general(code: Any, offset: int) -> None:
        try:
            fid = idf(code)
            if enter is not None:
                enter(fid)
            if arguments is not None:
                arguments(fid, arguments_of(getframe(1)))
        except RecursionError:
            pass
        except BaseException as exc:
            fail(exc, "function_enter")

    return on_start_general


def _return_callback(plan: Plan, fail: Callable[[BaseException, str], None]) -> Callable[..., Any]:
    """PY_RETURN: the common variant (leave only) first, then the general one."""
    leave, return_value = plan.leave, plan.return_value
    idf = id
    if leave is not None and return_value is None:

        def on_return(code: Any, offset: int, value: object) -> None:
            try:
                leave(idf(code))
            except RecursionError:
                pass
            except BaseException as exc:
                fail(exc, "function_leave")

        return on_return

    def on_return_general(code: Any, offset: int, value: object) -> None:
        try:
            fid = idf(code)
            if return_value is not None:
                return_value(fid, value)
            if leave is not None:
                leave(fid)
        except RecursionError:
            pass
        except BaseException as exc:
            fail(exc, "function_leave")

    return on_return_general


def _generator_callbacks(
    plan: Plan, fail: Callable[[BaseException, str], None], enabled: dict[int, object]
) -> tuple[Callable[..., Any], Callable[..., Any], Callable[..., Any]]:
    """PY_YIELD, PY_RESUME and PY_THROW (a ``throw()``/``close()`` resumes the frame)."""
    yield_, resume = plan.yield_, plan.resume
    idf = id

    def on_yield(code: Any, offset: int, value: object) -> None:
        if yield_ is not None:
            try:
                yield_(idf(code))
            except RecursionError:
                pass
            except BaseException as exc:
                fail(exc, "function_yield")

    def on_resume(code: Any, offset: int) -> None:
        if resume is not None:
            try:
                resume(idf(code))
            except RecursionError:
                pass
            except BaseException as exc:
                fail(exc, "function_resume")

    resumed = monitoring_form(resume, fail) or on_resume

    def on_throw(code: Any, offset: int, exc_value: BaseException) -> None:
        # gen.throw()/close() resumes the frame: global event, so test membership.
        if idf(code) in enabled:
            resumed(code, offset)

    return monitoring_form(yield_, fail) or on_yield, resumed, on_throw


def _unwind_callback(
    plan: Plan,
    fail: Callable[[BaseException, str], None],
    enabled: dict[int, object],
    pre_codes: set[int],
    pre_frames: set[int],
) -> Callable[..., Any]:
    """PY_UNWIND (global): accepted code, or a frame running at attach that was entered."""
    leave, unwind = plan.leave, plan.unwind
    idf = id
    getframe = sys._getframe

    def on_unwind(code: Any, offset: int, exc_value: BaseException) -> None:
        fid = idf(code)
        if fid in pre_codes:
            frame_id = idf(getframe(1))
            if frame_id not in pre_frames:
                return
            pre_frames.discard(frame_id)
        elif fid not in enabled:
            return
        try:
            if unwind is not None:
                unwind(fid)
            if leave is not None:
                leave(fid)
        except RecursionError:
            pass
        except BaseException as exc:
            fail(exc, "function_leave")

    return on_unwind


def _transition_callbacks(ctx: BackendContext) -> dict[int, Callable[..., Any]]:
    ev = MON.events
    plan = ctx.plan
    to_native, to_python = plan.to_native, plan.to_python
    native_id, fail = ctx.functions.native_id, ctx.fail
    native = NATIVE_TYPES

    def on_call(code: Any, offset: int, func: object, arg0: object) -> None:
        if to_native is not None and type(func) in native:
            try:
                to_native(native_id(func))
            except RecursionError:
                pass
            except BaseException as exc:
                fail(exc, "python_to_native_transition")

    def on_c_return(code: Any, offset: int, func: object, arg0: object) -> None:
        if to_python is not None and type(func) in native:
            try:
                to_python(native_id(func))
            except RecursionError:
                pass
            except BaseException as exc:
                fail(exc, "native_to_python_transition")

    return {ev.CALL: on_call, ev.C_RETURN: on_c_return, ev.C_RAISE: on_c_return}


def _exception_callbacks(
    ctx: BackendContext, enabled: dict[int, object]
) -> dict[int, Callable[..., Any]]:
    """RAISE / EXCEPTION_HANDLED / RERAISE for accepted functions, user-level only.

    The compiler wraps every ``except`` body in a hidden cleanup handler (``COPY 3;
    POP_EXCEPT; RERAISE 1``) that catches and re-raises once more; reporting it would show
    each ``except ...: raise`` as two catches and two re-raises. So a handler counts only
    if it starts with ``PUSH_EXC_INFO`` (an ``except``/``finally``/``with`` the user wrote),
    and a ``RERAISE`` right after ``POP_EXCEPT`` is the hidden one. Decided once per
    (code, offset).
    """
    ev = MON.events
    plan = ctx.plan
    idf, fail = id, ctx.fail
    user_level: dict[tuple[int, int], bool] = {}

    def is_user_level(code: Any, offset: int, handled: bool) -> bool:
        key = (idf(code), offset)
        verdict = user_level.get(key)
        if verdict is None:
            raw = code.co_code
            if handled:
                verdict = raw[offset] == _PUSH_EXC_INFO
            else:
                verdict = not (offset >= 2 and raw[offset - 2] == _POP_EXCEPT)
            user_level[key] = verdict
        return verdict

    def make(fn: Callable[..., Any] | None, what: str, kind: int) -> Callable[..., Any] | None:
        if fn is None:
            return None

        def on_exception(code: Any, offset: int, exc_value: BaseException) -> None:
            fid = idf(code)
            if fid in enabled and (kind == 0 or is_user_level(code, offset, kind == 1)):
                try:
                    fn(fid, exc_value)
                except RecursionError:
                    pass
                except BaseException as exc:
                    fail(exc, what)

        return on_exception

    out = {
        ev.RAISE: make(plan.thrown, "exception_thrown", 0),
        ev.EXCEPTION_HANDLED: make(plan.caught, "exception_caught", 1),
        ev.RERAISE: make(plan.reraised, "exception_reraised", 2),
    }
    return {e: f for e, f in out.items() if f is not None}
