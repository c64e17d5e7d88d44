"""The ``sys.setprofile`` backend: works on every supported Python (3.11 and up).

Its per-event dispatcher runs in C where ``_profhook`` is built (see ``_profhook.c``: the
same fast path as ``hook`` below, installed with ``PyEval_SetProfile`` as cProfile's is),
and in Python otherwise; both hand every undecided event to the same ``slow``.

``sys.setprofile`` reports ``call``/``return`` for every Python frame and ``c_call``/
``c_return``/``c_exception`` around C calls, on the thread that installed it;
``threading.setprofile`` covers threads started later (and, 3.12+,
``threading.setprofile_all_threads`` the ones already running). It cannot switch a
function off, so filtered functions still pay one callback and a dict lookup.

Generators: ``call`` fires on every resumption and ``return`` on every suspension, so
the backend looks at the opcode at ``f_lasti``: the first ``RESUME`` means a fresh
start, a ``YIELD_VALUE`` (3.11/3.12) or a later ``RESUME`` (3.13) at ``return`` a
suspension, ``RETURN_*`` a return, anything else an exception unwinding (which is also how
``exception_unwind_function_leave`` is found). A ``throw()`` into a suspended generator
that unwinds it is recognised on 3.11/3.12 (the ``call`` stops at ``YIELD_VALUE``); on
3.13 it is indistinguishable from a resume + yield, so such a generator is reported as
suspended and then simply never resumes (the same as 3.13's ``close()`` fast path, which
runs no code at all).
"""

from __future__ import annotations

import dis
import sys
import threading
from collections.abc import Callable
from types import CodeType, FrameType
from typing import Any

from profkit.collect.base import Capabilities
from profkit.collect.context import BackendContext
from profkit.collect.plan import ALL_EVENTS
from profkit.collect.registry import GENERATOR_FLAGS
from profkit.collect.transitions import arguments_of

try:  # the hot path in C (_profhook.c); without it, the Python ``hook`` below does the job
    from profkit.collect import _profhook
except ImportError:  # not built here
    _profhook = None  # type: ignore[assignment]

CAPABILITIES = Capabilities(
    events=ALL_EVENTS,
    cheap_filter=False,
    all_threads=hasattr(threading, "setprofile_all_threads"),
    full_exceptions=False,
)

_RESUME = dis.opmap["RESUME"]
_YIELD = dis.opmap["YIELD_VALUE"]
_RETURNS = frozenset(dis.opmap[n] for n in ("RETURN_VALUE", "RETURN_CONST") if n in dis.opmap)

# Per-code status values.
_REJECTED, _PLAIN, _GEN, _PRE = 0, 1, 2, 3


class SetprofileBackend:
    """Profile-function collector; see the module docstring."""

    name = "setprofile"
    capabilities = CAPABILITIES

    def __init__(self, ctx: BackendContext) -> None:
        self.ctx = ctx
        self._state: list[bool] = [False]  #: [running]; checked by every thread's hook
        self._hook: Callable[..., Any] | None = None
        #: [the running hook, or None]: where a stopped hook sends its thread (a rearm)
        self._current: list[Callable[..., Any] | None] = [None]

    def start(self) -> None:
        """Install the profile function on this thread, new threads, and (3.12+) all."""
        plan = self.ctx.plan
        if not (plan.tracks_calls or plan.wants_transitions or plan.first_execution):
            return
        self._state = [True]
        hook = _make_hook(self.ctx, self._state, self._current)
        self._hook = hook
        self._current[0] = hook
        threading.setprofile(hook)
        all_threads = getattr(threading, "setprofile_all_threads", None)
        if all_threads is not None:
            all_threads(hook)
        else:
            sys.setprofile(hook)

    def stop(self) -> None:
        """Remove the hook (threads the hook cannot reach remove it at their next event)."""
        if self._hook is None:
            return
        self._current[0] = None  # before the state: a stopped hook must find no successor
        self._state[0] = False
        getattr(self._hook, "status", {}).clear()  # every later event takes the slow path
        self._hook = None
        threading.setprofile(None)
        all_threads = getattr(threading, "setprofile_all_threads", None)
        if all_threads is not None:
            all_threads(None)
        else:
            sys.setprofile(None)

    def rearm(self) -> None:
        """Rebuild the hook from the new plan."""
        self.stop()
        self.start()


def _running_codes() -> set[int]:
    out: set[int] = set()
    for frame in sys._current_frames().values():
        f: Any = frame
        while f is not None:
            if not f.f_code.co_flags & GENERATOR_FLAGS:
                out.add(id(f.f_code))
            f = f.f_back
    return out


def _noop(*_: Any) -> None:
    return None


def _make_hook(
    ctx: BackendContext, state: list[bool], current: list[Callable[..., Any] | None]
) -> Callable[..., Any]:
    """Build the profile function for the session's plan (all bindings done here).

    The hot path is a plain (non-generator) function whose verdict is known: two string
    compares, ``id``, one dict lookup and the profiler's method. Everything else (first
    sight, generators, frames running at attach, transitions, a stopped session) goes
    through ``slow``. ``stop()`` clears ``status``, so after a detach every event takes the
    slow path, which removes the hook from threads that ``stop()`` could not reach.
    """
    plan = ctx.plan
    enter = plan.enter or _noop
    leave = plan.leave or _noop
    yield_, resume = plan.yield_, plan.resume
    arguments, return_value, unwind = plan.arguments, plan.return_value, plan.unwind
    to_native, to_python = plan.to_native, plan.to_python
    transitions = plan.wants_transitions
    fail = ctx.fail
    native_id = ctx.functions.native_id
    discover = ctx.discover
    status: dict[int, int] = {}
    status_get = status.get
    gen_code: dict[int, tuple[bytes, int]] = {}
    pre = _running_codes()
    pre_frames: set[int] = set()
    throwing: dict[int, int] = {}
    idf = id
    setprofile = sys.setprofile
    # Plain functions take the fast path only when nothing else is wanted at entry/exit.
    fast = arguments is None and return_value is None and unwind is None
    plain_fast = _PLAIN if fast else -1

    def classify(code: CodeType) -> int:
        fid, ok = discover(code)
        if not ok:
            st = _REJECTED
        elif code.co_flags & GENERATOR_FLAGS:
            raw = code.co_code
            first = next((i for i in range(0, len(raw), 2) if raw[i] == _RESUME), 0)
            gen_code[fid] = (raw, first)
            st = _GEN
        elif fid in pre:
            st = _PRE
        else:
            st = _PLAIN
        status[fid] = st
        return st

    def deliver_enter(frame: FrameType, fid: int, fresh: bool) -> None:
        try:
            if fresh:
                enter(fid)
                if arguments is not None:
                    arguments(fid, arguments_of(frame))
            elif resume is not None:
                resume(fid)
        except RecursionError:
            pass
        except Exception as exc:
            fail(exc, "function_enter")

    def deliver_exit(fid: int, kind: int, value: object) -> None:
        # kind: 0 return, 1 yield, 2 unwind
        try:
            if kind == 1:
                if yield_ is not None:
                    yield_(fid)
                return
            if kind == 0 and return_value is not None:
                return_value(fid, value)
            elif kind == 2 and unwind is not None:
                unwind(fid)
            leave(fid)
        except RecursionError:
            pass
        except Exception as exc:
            fail(exc, "function_leave")

    def exit_kind(code: CodeType, frame: FrameType) -> int:
        return 0 if code.co_code[frame.f_lasti] in _RETURNS else 2

    def slow(frame: FrameType, event: str, arg: Any) -> None:
        if not state[0]:
            # Stopped. A rearm (3.11: stop + start reach only the calling thread) left a
            # successor for this thread to take over; a detach left none.
            successor = current[0]
            setprofile(successor)
            if successor is not None:
                successor(frame, event, arg)
            return
        code = frame.f_code
        fid = idf(code)
        if event == "call":
            st = status_get(fid)
            if st is None:
                st = classify(code)
            if st == _PLAIN:
                deliver_enter(frame, fid, True)
            elif st == _GEN:
                raw, first = gen_code[fid]
                lasti = frame.f_lasti
                if lasti < first:
                    pass  # throw() into an unstarted generator: none of its code runs
                elif lasti == first:
                    deliver_enter(frame, fid, True)
                else:
                    if raw[lasti] == _YIELD:
                        throwing[idf(frame)] = lasti
                    deliver_enter(frame, fid, False)
            elif st == _PRE:
                pre_frames.add(idf(frame))
                deliver_enter(frame, fid, True)
        elif event == "return":
            st = status_get(fid)
            if st is None:
                # A return whose call we never saw: the frame predates the hook (e.g. the
                # attach call chain, or a thread's frames on 3.11). Track this code by frame
                # from now on, so only calls seen entering are reported leaving.
                st = classify(code)
                if st == _PLAIN:
                    st = status[fid] = _PRE
            if st == _PLAIN:
                deliver_exit(fid, exit_kind(code, frame), arg)
            elif st == _GEN:
                raw, first = gen_code[fid]
                lasti = frame.f_lasti
                if lasti < first:
                    return  # the unstarted generator thrown into: it never entered
                op = raw[lasti]
                if op == _YIELD or (op == _RESUME and lasti != first):
                    # 3.11/3.12 stop at the YIELD_VALUE, 3.13 at the RESUME after it.
                    thrown_at = throwing.pop(idf(frame), None)
                    kind = 2 if thrown_at == lasti and arg is None else 1
                else:
                    # Gone for good (a return, or an unwind that may have left a throw()
                    # at another offset): its record must not outlive the frame, whose
                    # address a later generator frame can take.
                    throwing.pop(idf(frame), None)
                    kind = 0 if op in _RETURNS else 2
                deliver_exit(fid, kind, arg)
            elif st == _PRE:
                frame_id = idf(frame)
                if frame_id in pre_frames:
                    pre_frames.discard(frame_id)
                    deliver_exit(fid, exit_kind(code, frame), arg)
        elif transitions and status_get(fid):
            try:
                if event == "c_call":
                    if to_native is not None:
                        to_native(native_id(arg))
                elif to_python is not None:
                    to_python(native_id(arg))
            except RecursionError:
                pass
            except Exception as exc:
                fail(exc, "code transition")

    gen_fast = _GEN if fast else -1
    yield_cb = yield_ or _noop
    resume_cb = resume or _noop

    def hook(frame: FrameType, event: str, arg: Any) -> None:
        # The whole body: at the recursion limit even its first builtin call raises, and
        # an exception leaving a profile function lands in the program with this frame.
        try:
            if event == "call":
                fid = idf(frame.f_code)
                st = status_get(fid)
                if st == plain_fast:
                    try:
                        enter(fid)
                    except Exception as exc:
                        fail(exc, "function_enter")
                    return
                if st == _REJECTED:
                    return
                if st == gen_fast:
                    raw, first = gen_code[fid]
                    lasti = frame.f_lasti
                    if lasti < first:
                        return  # throw() into an unstarted generator: none of its code runs
                    if raw[lasti] != _YIELD:  # a throw() stops at YIELD_VALUE: slow path
                        try:
                            if lasti == first:
                                enter(fid)
                            else:
                                resume_cb(fid)
                        except Exception as exc:
                            fail(exc, "function_enter")
                        return
            elif event == "return":
                fid = idf(frame.f_code)
                st = status_get(fid)
                if st == plain_fast:
                    try:
                        leave(fid)
                    except Exception as exc:
                        fail(exc, "function_leave")
                    return
                if st == _REJECTED:
                    return
                if st == gen_fast and not throwing:
                    raw, first = gen_code[fid]
                    lasti = frame.f_lasti
                    if lasti < first:
                        return  # the unstarted generator thrown into: it never entered
                    op = raw[lasti]
                    try:
                        if op == _YIELD or (op == _RESUME and lasti != first):
                            yield_cb(fid)
                        else:
                            leave(fid)  # a return or an unwind: both leave
                    except Exception as exc:
                        fail(exc, "function_leave")
                    return
            elif not transitions and state[0]:
                return
            slow(frame, event, arg)
        except RecursionError:
            return  # the program's (see failure.py)

    if _profhook is not None and ctx.native:
        # The same fast path in C, on the same tables, handing the same cases to ``slow``.
        return _profhook.Hook(
            status=status,
            gen_code=gen_code,
            throwing=throwing,
            state=state,
            slow=slow,
            fail=fail,
            enter=plan.enter,
            leave=plan.leave,
            yield_=yield_,
            resume=resume,
            plain_fast=plain_fast,
            gen_fast=gen_fast,
            transitions=transitions,
            resume_op=_RESUME,
            yield_op=_YIELD,
        )
    hook.status = status  # type: ignore[attr-defined,unused-ignore]
    return hook
