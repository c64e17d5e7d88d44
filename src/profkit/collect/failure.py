"""The failure rule: a profiler that raises is reported once and contained.

One object per session decides what a profiler's exception means (:meth:`FailureRule.fail`);
everything that calls the profiler hands its exceptions here. Off the hot path a call goes
through :meth:`FailureRule.call`. On the hot path (the backends' per-event callbacks) an
extra Python frame per event would cost more than the callback itself, so each callback
guards its own call with the same two clauses, written once per site and explained only
here::

    try:
        profiler_method(...)
    except RecursionError:
        pass
    except BaseException as exc:
        fail(exc, "what")

``except RecursionError: pass`` is the rule's first case inlined: a ``RecursionError`` is
the program's (it is at its recursion limit and the callback's frames pushed it over), and
calling ``fail`` there could overflow again and land in the program.

The sites catch ``BaseException``, and ``fail`` decides. A ``KeyboardInterrupt`` or
``SystemExit`` raised in a callback once the program runs is the program's (a Ctrl-C lands
wherever the main thread is, often inside a callback, and nothing tells a profiler's own
``raise KeyboardInterrupt`` from it): it is raised again, into the program. During start-up
(while ``site`` runs the ``.pth`` files, ``sitecustomize`` and ``usercustomize``) there is no
program yet and such an exception would be "Fatal Python error: init_import_site" for every
Python process of the environment: then it is the profiler's, contained like any other.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from types import CodeType

TYPE_CHECKING = False  # typing's, without importing typing at run time (profkit run's start-up)
if TYPE_CHECKING:
    from typing import Any


class FailureRule:
    """Report a profiler's failure once, detach it, and let the program go on."""

    def __init__(self, profiler_name: str, report: Callable[[str], None] | None = None) -> None:
        self.profiler_name = profiler_name
        self.failed = False
        self._report = report or _stderr_line
        self._detach: Callable[[], None] = _nothing
        #: who turned ``failed`` on: claimed with ``setdefault`` rather than a lock, which
        #: another thread could hold across the program's ``fork()`` (the child would hang)
        self._claim: dict[str, object] = {}

    def on_failure(self, detach: Callable[[], None]) -> None:
        """What containing a failure means: the session's detach."""
        self._detach = detach

    def fail(self, exc: BaseException, what: str) -> None:
        """The profiler raised in ``what``: report once, detach, let the program go on.

        A ``RecursionError`` is the program's, not the profiler's: the program is at its
        recursion limit and the callback's frames pushed it over. That one notification is
        skipped and the profiler stays attached; a frame's enter and leave run at the same
        depth, so they are skipped together and stay paired.

        An exception raised by one of the program's signal handlers is the program's too:
        a handler runs wherever the main thread is, often inside a callback. It is raised
        again, into the program, where it would have surfaced without profiling.
        """
        if not isinstance(exc, Exception) and not in_start_up():
            raise exc  # KeyboardInterrupt, SystemExit once the program runs: the program's
        if isinstance(exc, RecursionError) and what != "initialize":
            return
        if _from_signal_handler(exc):
            raise exc  # the program's: its signal handler ran inside the callback
        if not self._first(exc):
            return
        self._line(what, exc)
        self._detach()

    def call(self, what: str, fn: Callable[..., Any], *args: Any) -> None:
        """Call a profiler method outside the hot path, applying the rule."""
        try:
            fn(*args)
        except RecursionError:
            pass
        except BaseException as exc:
            self.fail(exc, what)

    def call_at_shutdown(self, profiler: object, name: str) -> None:
        """``shutdown``/``profiler_detach_succeeded``: reported (once), nothing to detach."""
        try:
            getattr(profiler, name)()
        except Exception as exc:
            if not self.failed and self._first(exc):
                self._line(name, exc)

    def _first(self, exc: BaseException) -> bool:
        token = object()
        if self._claim.setdefault("failed", token) is not token:
            return False
        self.failed = True
        return True

    def _line(self, what: str, exc: BaseException) -> None:
        self._report(
            f"profkit: profiler {self.profiler_name} failed in {what}: "
            f"{type(exc).__name__}: {exc}; detached"
        )


def _nothing() -> None:
    return None


def _stderr_line(line: str) -> None:
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except Exception:  # pragma: no cover - a closed stderr must not break the program
        pass


def in_start_up() -> bool:
    """Whether Python is still importing ``site`` (the start-up hook runs from there).

    Failure path only. The import system marks a module's spec ``_initializing`` while it
    executes; ``site`` is imported once, at start-up, and finishes before the program runs.
    """
    site = sys.modules.get("site")
    spec = getattr(site, "__spec__", None)
    return bool(getattr(spec, "_initializing", False))


def _from_signal_handler(exc: BaseException) -> bool:
    """Whether ``exc`` passed through a Python signal handler the program installed.

    Failure path only: it asks ``signal.getsignal`` for every signal.
    """
    if threading.current_thread() is not threading.main_thread():
        return False  # Python signal handlers only ever run on the main thread
    import signal

    codes = set()
    for signum in signal.valid_signals():
        try:
            handler = signal.getsignal(signum)
        except (OSError, ValueError):  # pragma: no cover - platform-specific signals
            continue
        func = getattr(handler, "__func__", handler)
        code = getattr(func, "__code__", None)
        if isinstance(code, CodeType):
            codes.add(code)
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code in codes:
            return True
        tb = tb.tb_next
    return False
