"""The Python twin of ``_profhook.Hook``: the setprofile backend's fast path without C.

Same constructor (keyword for keyword) and same decisions as the C type, so the backend
builds either one from the same arguments and the same tests run against both (as
pyinstrument's ``low_level`` keeps a C and a Python stat profiler). It is used where the
extension is not built and with ``attach(native=False)``.

``Hook`` is a function returning a closure rather than a class: a profile function that
is a plain closure is called without a bound-method object and reads its bindings from
cells, not attributes, which is the cheapest a Python profile function gets. The tables
belong to the backend (``setprofile_slow.Tables``); this fast path only reads them, but
for ``throwing``, which it keeps as ``slow`` does (a ``throw()`` into a suspended
generator, e.g. the ``close()`` of an ``any()``/``all()`` that stopped early, is common
enough to be worth the fast path). An event it does not decide (first sight of a code
object, frames running at attach, C calls of an unknown caller, a stopped session) goes
to ``slow``.
"""

from __future__ import annotations

from collections.abc import Callable
from types import FrameType
from typing import Any, NamedTuple


def _noop(*_: Any) -> None:
    return None


def Hook(
    *,
    status: dict[int, int],
    gen_code: dict[int, tuple[bytes, int]],
    throwing: dict[int, int],
    state: list[bool],
    slow: Callable[[FrameType, str, Any], None],
    fail: Callable[[BaseException, str], None],
    enter: Callable[[int], object] | None,
    leave: Callable[[int], object] | None,
    yield_: Callable[[int], object] | None,
    resume: Callable[[int], object] | None,
    plain_fast: int,
    gen_fast: int,
    transitions: bool,
    resume_op: int,
    yield_op: int,
    to_native: Callable[[int], object] | None = None,
    to_python: Callable[[int], object] | None = None,
    native_id: Callable[[Any], int] | None = None,
) -> Callable[[FrameType, str, Any], None]:
    """A profile function over the given tables; its ``status`` attribute is the table.

    Without ``native_id`` every C-call event goes to ``slow`` (which finds the id itself).
    """
    hook = _profile_function(
        _Bindings(
            status.get,
            gen_code,
            throwing,
            state,
            slow,
            fail,
            enter or _noop,
            leave or _noop,
            yield_ or _noop,
            resume or _noop,
            plain_fast,
            gen_fast,
            transitions,
            resume_op,
            yield_op,
            to_native,
            to_python,
            native_id,
        )
    )
    hook.status = status  # type: ignore[attr-defined]
    return hook


class _Bindings(NamedTuple):
    status_get: Callable[[int], int | None]
    gen_code: dict[int, tuple[bytes, int]]
    throwing: dict[int, int]
    state: list[bool]
    slow: Callable[[FrameType, str, Any], None]
    fail: Callable[[BaseException, str], None]
    enter: Callable[[int], object]
    leave: Callable[[int], object]
    yield_: Callable[[int], object]
    resume: Callable[[int], object]
    plain_fast: int
    gen_fast: int
    transitions: bool
    resume_op: int
    yield_op: int
    to_native: Callable[[int], object] | None
    to_python: Callable[[int], object] | None
    native_id: Callable[[Any], int] | None


def _profile_function(b: _Bindings) -> Callable[[FrameType, str, Any], None]:
    """The closure itself: every binding a cell, nothing looked up per event."""
    status_get, gen_code, throwing, state, slow, fail = b[:6]
    enter_cb, leave_cb, yield_cb, resume_cb = b.enter, b.leave, b.yield_, b.resume
    plain_fast, gen_fast, transitions = b.plain_fast, b.gen_fast, b.transitions
    _RESUME, _YIELD = b.resume_op, b.yield_op
    c_call = _c_calls(b)
    rejected = 0  # setprofile_slow.REJECTED
    idf = id

    def hook(frame: FrameType, event: str, arg: Any) -> None:
        # The whole body: at the recursion limit even its first builtin call raises, and
        # an exception leaving a profile function lands in the program with this frame.
        try:
            if event == "call":
                fid = idf(frame.f_code)
                st = status_get(fid)
                if st == plain_fast:
                    try:
                        enter_cb(fid)
                    except BaseException as exc:
                        fail(exc, "function_enter")
                    return
                if st == rejected:
                    return
                if st == gen_fast:
                    raw, first = gen_code[fid]
                    lasti = frame.f_lasti
                    if lasti < first:
                        return  # throw() into an unstarted generator: none of its code runs
                    try:
                        if lasti == first:
                            enter_cb(fid)
                        else:
                            if raw[lasti] == _YIELD:  # a throw() (close()) stops there
                                throwing[idf(frame)] = lasti
                            resume_cb(fid)
                    except BaseException as exc:
                        fail(exc, "function_enter")
                    return
            elif event == "return":
                fid = idf(frame.f_code)
                st = status_get(fid)
                if st == plain_fast:
                    try:
                        leave_cb(fid)
                    except BaseException as exc:
                        fail(exc, "function_leave")
                    return
                if st == rejected:
                    return
                if st == gen_fast:
                    raw, first = gen_code[fid]
                    lasti = frame.f_lasti
                    if lasti < first:
                        return  # the unstarted generator thrown into: it never entered
                    op = raw[lasti]
                    try:
                        thrown_at = throwing.pop(idf(frame), None) if throwing else None
                        if (op == _YIELD or (op == _RESUME and lasti != first)) and (
                            thrown_at != lasti or arg is not None
                        ):
                            yield_cb(fid)
                        else:
                            leave_cb(fid)  # a return or an unwind (a throw's too): both leave
                    except BaseException as exc:
                        fail(exc, "function_leave")
                    return
            elif state[0] and (not transitions or c_call(frame, event, arg)):
                return
            slow(frame, event, arg)
        except RecursionError:
            return  # the program's (see failure.py)

    return hook


def _c_calls(b: _Bindings) -> Callable[[FrameType, str, Any], bool]:
    """``c_call(frame, event, arg)`` for a c_call/c_return/c_exception event while running:
    True when handled (a known caller), False for the slow path."""
    status_get, fail = b.status_get, b.fail
    to_native, to_python, native_id = b.to_native, b.to_python, b.native_id
    rejected = 0  # setprofile_slow.REJECTED
    idf = id

    def c_call(frame: FrameType, event: str, arg: Any) -> bool:
        if native_id is None:
            return False
        st = status_get(idf(frame.f_code))
        if st is None:
            return False  # an unknown caller: the slow path classifies it
        target = to_native if event == "c_call" else to_python
        if st != rejected and target is not None:
            try:
                target(native_id(arg))
            except RecursionError:
                pass
            except BaseException as exc:
                fail(exc, "code transition")
        return True

    return c_call
