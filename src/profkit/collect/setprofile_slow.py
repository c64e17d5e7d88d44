"""The setprofile backend's tables and its slow path (everything the fast path leaves).

:class:`Tables` owns the four containers the fast path reads (C ``_profhook.Hook`` or
its Python twin ``_pyhook.Hook``): only this module writes them, the fast paths only
read them -- but for ``throwing``, which the fast paths keep exactly as ``slow`` does
(note a throw() into a suspended generator at its YIELD_VALUE, pop the note at the
frame's return), since ``close()`` after an ``any()``/``all()`` that stopped early
throws into a generator on every such call. :func:`make_slow` builds ``slow(frame, event, arg)``, which decides what the
fast path cannot: the first sight of a code object (``classify``), generators being
thrown into, frames that were running at attach, C calls (code transitions), and a
stopped session (hand the thread to the re-armed hook, or drop the hook).

Generators: ``call`` fires on every resumption and ``return`` on every suspension, so
the opcode at ``f_lasti`` says which it is (see ``setprofile.py``).
"""

from __future__ import annotations

import opcode
import sys
from collections.abc import Callable
from types import CodeType, FrameType

from profkit.collect.context import BackendContext
from profkit.collect.idtables import GENERATOR_FLAGS
from profkit.collect.plan import Plan
from profkit.collect.transitions import arguments_of

TYPE_CHECKING = False  # typing's, without importing typing at run time (profkit run's start-up)
if TYPE_CHECKING:
    from typing import Any

RESUME = opcode.opmap["RESUME"]
YIELD = opcode.opmap["YIELD_VALUE"]
RETURNS = frozenset(opcode.opmap[n] for n in ("RETURN_VALUE", "RETURN_CONST") if n in opcode.opmap)

# Per-code status values (``csrc/profhook.h`` and ``_pyhook.py`` know 0 = rejected).
REJECTED, PLAIN, GEN, PRE = 0, 1, 2, 3

# deliver_exit kinds
_RETURN, _YIELDED, _UNWIND = 0, 1, 2


class Tables:
    """What the fast path reads, owned here: one writer, read-only users."""

    __slots__ = ("gen_code", "pre", "pre_frames", "state", "status", "throwing")

    def __init__(self, state: list[bool]) -> None:
        self.status: dict[int, int] = {}  #: fid → REJECTED/PLAIN/GEN/PRE
        self.gen_code: dict[int, tuple[bytes, int]] = {}  #: fid → (co_code, first RESUME)
        self.throwing: dict[int, int] = {}  #: frames a throw() entered → its offset
        self.state = state  #: [running], shared by every hook of one backend start
        self.pre = running_codes()  #: non-generator codes running now (never entered)
        self.pre_frames: set[int] = set()  #: their frames entered since

    def fast_path_tables(self) -> dict[str, Any]:
        """The keyword arguments naming the tables for ``Hook(...)`` (read there, never written)."""
        return {
            "status": self.status,
            "gen_code": self.gen_code,
            "throwing": self.throwing,
            "state": self.state,
        }


def running_codes() -> set[int]:
    """Ids of non-generator codes on any thread's stack now."""
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


def exit_kind(code: CodeType, frame: FrameType) -> int:
    """A plain function's ``return`` event: a return, or an exception unwinding it."""
    return _RETURN if code.co_code[frame.f_lasti] in RETURNS else _UNWIND


def _classifier(ctx: BackendContext, tables: Tables) -> Callable[[CodeType], int]:
    """First sight of a code object: its status row (and bytecode, for generators)."""
    discover = ctx.discover
    status, gen_code, pre = tables.status, tables.gen_code, tables.pre

    def classify(code: CodeType) -> int:
        fid, ok = discover(code)
        if not ok:
            st = REJECTED
        elif code.co_flags & GENERATOR_FLAGS:
            raw = code.co_code
            first = next((i for i in range(0, len(raw), 2) if raw[i] == RESUME), 0)
            gen_code[fid] = (raw, first)
            st = GEN
        elif fid in pre:
            st = PRE
        else:
            st = PLAIN
        status[fid] = st
        return st

    return classify


def _deliverers(
    plan: Plan, fail: Callable[[BaseException, str], None]
) -> tuple[Callable[[FrameType, int, bool], None], Callable[[int, int, object], None]]:
    """``deliver_enter(frame, fid, fresh)`` and ``deliver_exit(fid, kind, value)``."""
    enter, leave = plan.enter or _noop, plan.leave or _noop
    yield_, resume = plan.yield_, plan.resume
    arguments, return_value, unwind = plan.arguments, plan.return_value, plan.unwind

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
        except BaseException as exc:
            fail(exc, "function_enter")

    def deliver_exit(fid: int, kind: int, value: object) -> None:
        try:
            if kind == _YIELDED:
                if yield_ is not None:
                    yield_(fid)
                return
            if kind == _RETURN and return_value is not None:
                return_value(fid, value)
            elif kind == _UNWIND and unwind is not None:
                unwind(fid)
            leave(fid)
        except RecursionError:
            pass
        except BaseException as exc:
            fail(exc, "function_leave")

    return deliver_enter, deliver_exit


def _generator_exit(tables: Tables) -> Callable[[FrameType, int, object], int | None]:
    """A generator frame's ``return`` event: yielded, returned, unwound, or not entered."""
    gen_code, throwing = tables.gen_code, tables.throwing

    def generator_exit(frame: FrameType, fid: int, arg: object) -> int | None:
        raw, first = gen_code[fid]
        lasti = frame.f_lasti
        if lasti < first:
            return None  # the unstarted generator thrown into: it never entered
        op = raw[lasti]
        if op == YIELD or (op == RESUME and lasti != first):
            # 3.11/3.12 stop at the YIELD_VALUE, 3.13 at the RESUME after it.
            thrown_at = throwing.pop(id(frame), None)
            return _UNWIND if thrown_at == lasti and arg is None else _YIELDED
        # Gone for good (a return, or an unwind that may have left a throw() at another
        # offset): its record must not outlive the frame, whose address a later
        # generator frame can take.
        throwing.pop(id(frame), None)
        return _RETURN if op in RETURNS else _UNWIND

    return generator_exit


def _hand_over(current: list[Callable[..., Any] | None]) -> Callable[[FrameType, str, Any], None]:
    """A stopped hook's event: a rearm (3.11: stop + start reach only the calling thread)
    left a successor for this thread to take over; a detach left none."""
    setprofile = sys.setprofile

    def hand_over(frame: FrameType, event: str, arg: Any) -> None:
        successor = current[0]
        setprofile(successor)
        if successor is not None:
            successor(frame, event, arg)

    return hand_over


def make_slow(
    ctx: BackendContext, plan: Plan, tables: Tables, current: list[Callable[..., Any] | None]
) -> Callable[[FrameType, str, Any], None]:
    """``slow(frame, event, arg)`` for one plan over ``tables``; ``current`` holds the
    backend's running hook, which a stopped hook hands its thread to."""
    classify = _classifier(ctx, tables)
    deliver_enter, deliver_exit = _deliverers(plan, ctx.fail)
    to_native, to_python = plan.to_native, plan.to_python
    native_id, fail = ctx.functions.native_id, ctx.fail
    generator_exit = _generator_exit(tables)
    status_get = tables.status.get
    status, gen_code, throwing = tables.status, tables.gen_code, tables.throwing
    pre_frames, state = tables.pre_frames, tables.state
    transitions = plan.wants_transitions
    idf = id
    hand_over = _hand_over(current)

    def slow(frame: FrameType, event: str, arg: Any) -> None:
        if not state[0]:
            hand_over(frame, event, arg)
            return
        code = frame.f_code
        fid = idf(code)
        if event == "call":
            st = status_get(fid)
            if st is None:
                st = classify(code)
            if st == PLAIN:
                deliver_enter(frame, fid, True)
            elif st == GEN:
                raw, first = gen_code[fid]
                lasti = frame.f_lasti
                if lasti < first:
                    pass  # throw() into an unstarted generator: none of its code runs
                elif lasti == first:
                    deliver_enter(frame, fid, True)
                else:
                    if raw[lasti] == YIELD:
                        throwing[idf(frame)] = lasti
                    deliver_enter(frame, fid, False)
            elif st == PRE:
                pre_frames.add(idf(frame))
                deliver_enter(frame, fid, True)
        elif event == "return":
            st = status_get(fid)
            if st is None:
                # A return whose call we never saw: the frame predates the hook (e.g. the
                # attach call chain, or a thread's frames on 3.11). Track this code by frame
                # from now on, so only calls seen entering are reported leaving.
                st = classify(code)
                if st == PLAIN:
                    st = status[fid] = PRE
            if st == PLAIN:
                deliver_exit(fid, exit_kind(code, frame), arg)
            elif st == GEN:
                kind = generator_exit(frame, fid, arg)
                if kind is not None:
                    deliver_exit(fid, kind, arg)
            elif st == PRE:
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
            except BaseException as exc:
                fail(exc, "code transition")

    return slow
