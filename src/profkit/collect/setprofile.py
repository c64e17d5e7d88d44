"""The ``sys.setprofile`` backend: works on every supported Python (3.11 and up).

Its per-event dispatcher runs in C where ``_profhook`` is built (see ``csrc/profhook.h``: the
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

import sys
import threading
from collections.abc import Callable

from profkit.collect.base import Capabilities
from profkit.collect.context import BackendContext
from profkit.collect.plan import ALL_EVENTS
from profkit.collect.setprofile_slow import (
    GEN,
    PLAIN,
    REJECTED,
    RESUME,
    YIELD,
    Tables,
    make_slow,
)

TYPE_CHECKING = False  # typing's, without importing typing at run time (profkit run's start-up)
if TYPE_CHECKING:
    from collections.abc import Iterable
    from types import CodeType
    from typing import Any

try:  # the hot path in C (csrc/); without it, its Python twin ``_pyhook.Hook``
    from profkit.collect import _profhook
except ImportError:  # not built here
    _profhook = None  # type: ignore[assignment]

CAPABILITIES = Capabilities(
    events=ALL_EVENTS,
    cheap_filter=False,
    all_threads=hasattr(threading, "setprofile_all_threads"),
    full_exceptions=False,
)

_RESUME, _YIELD = RESUME, YIELD  # the names the C type's tests pass as resume_op/yield_op


class SetprofileBackend:
    """Profile-function collector; see the module docstring."""

    name = "setprofile"
    capabilities = CAPABILITIES

    def __init__(self, ctx: BackendContext) -> None:
        self.ctx = ctx
        self._state: list[bool] = [False]  #: [running]; checked by every thread's hook
        self._hook: Callable[..., Any] | None = None
        self._tables: Tables | None = None
        #: [the running hook, or None]: where a stopped hook sends its thread (a rearm)
        self._current: list[Callable[..., Any] | None] = [None]

    def start(self) -> None:
        """Install the profile function on this thread, new threads, and (3.12+) all."""
        plan = self.ctx.plan
        if not (plan.tracks_calls or plan.wants_transitions or plan.first_execution):
            return
        self._state = [True]
        hook, self._tables = _make_hook(self.ctx, self._state, self._current)
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
        if self._tables is not None:
            self._tables.status.clear()  # every later event takes the slow path
        self._hook = None
        threading.setprofile(None)
        all_threads = getattr(threading, "setprofile_all_threads", None)
        if all_threads is not None:
            all_threads(None)
        else:
            sys.setprofile(None)

    def abandon(self) -> None:
        """In a forked child: only take the profile function off this thread (the only
        one), keeping the hook and its tables (their pages are the parent's; clearing
        them, or freeing the hook, wrote to each one)."""
        if self._hook is None:
            return
        self._current[0] = None
        self._state[0] = False
        threading.setprofile(None)
        all_threads = getattr(threading, "setprofile_all_threads", None)
        if all_threads is not None:
            all_threads(None)
        else:
            sys.setprofile(None)

    #: the hook stays installed, mute from the fork on (``_profhook``) until resumed
    resumes_after_fork = True

    def resume_after_fork(self) -> None:
        """In a forked child: the C hook, mute since the fork, records again (its
        Python twin never went mute: the profiler's recorder ignored it meanwhile)."""
        resume = getattr(self._hook, "resume_after_fork", None)
        if resume is not None:
            resume()

    def classify_ahead(self, codes: Iterable[CodeType]) -> None:
        """Classify ``codes`` now where they are the collector's or the profiler's own
        (rejected): a forked child runs them in its after-fork hooks, where each first
        sight took the slow path (``collect._before_fork``). Others are left to their
        first call, as always."""
        tables = self._tables
        if tables is None or not self._state[0]:
            return
        status, discover = tables.status, self.ctx.discover
        for code in codes:
            if id(code) not in status:
                fid, accepted = discover(code)
                if not accepted:
                    status[fid] = REJECTED

    def rearm(self) -> None:
        """Rebuild the hook from the new plan."""
        self.stop()
        self.start()


def _make_hook(
    ctx: BackendContext, state: list[bool], current: list[Callable[..., Any] | None]
) -> tuple[Callable[..., Any], Tables]:
    """Build the profile function for the session's plan (all bindings done here).

    The hot path is a plain (non-generator) function whose verdict is known: ``id``, one
    dict lookup and the profiler's method; a C call made by a known function adds the C
    function's id (``native_id``, cached in C). Everything else (first sight, a throw(),
    frames running at attach, a stopped session) goes through ``slow``.
    ``stop()`` clears ``status``, so after a detach every event takes the slow path, which
    removes the hook from threads that ``stop()`` could not reach. The fast path is the C
    ``_profhook.Hook`` where it is built and allowed, else its Python twin; both get the
    same arguments.
    """
    plan = ctx.plan
    tables = Tables(state)
    # Plain functions take the fast path only when nothing else is wanted at entry/exit.
    fast = plan.arguments is None and plan.return_value is None and plan.unwind is None
    if _profhook is not None and ctx.native:
        impl: Any = _profhook
    else:
        from profkit.collect import _pyhook as impl
    hook = impl.Hook(
        **tables.fast_path_tables(),
        slow=make_slow(ctx, plan, tables, current),
        fail=ctx.fail,
        enter=plan.enter,
        leave=plan.leave,
        yield_=plan.yield_,
        resume=plan.resume,
        plain_fast=PLAIN if fast else -1,
        gen_fast=GEN if fast else -1,
        transitions=plan.wants_transitions,
        resume_op=RESUME,
        yield_op=YIELD,
        to_native=plan.to_native,
        to_python=plan.to_python,
        native_id=ctx.functions.native_id,
    )
    return hook, tables
