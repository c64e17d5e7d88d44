"""profkit.collect: attach a :class:`~profkit.api.ProfilerCallback` to this process.

``attach(profiler)`` calls ``profiler.initialize(info)``, chooses the backend the event mask
needs (``select.py``), and starts hooks on every thread; ``detach()`` removes them and calls
``shutdown()`` exactly once (also run ``atexit``). One profiler per process.

The package, one job per module:

* ``backends.py`` the backend table (name → class, capabilities, availability);
  ``select.py`` the choice made from it; ``base.py`` what every backend offers.
* ``session.py`` one profiler's lifecycle; ``info.py`` the ``ProfilerInfo`` it is given;
  ``catalog.py`` the id tables (``idtables.py``) and the filter's verdicts;
  ``failure.py`` the failure rule; ``context.py`` what a backend may read and call;
  ``plan.py`` the profiler's callbacks bound for the mask.
* Backends: ``monitoring.py`` + ``hot_monitoring.py`` (3.12+), ``setprofile.py`` with its
  slow path ``setprofile_slow.py`` and its fast path in C (``_profhook``, ``csrc/``) or Python
  (``_pyhook.py``), ``sampler.py``; ``hooks.py`` the thread, import and GC side hooks.
* ``startup.py`` activation by environment (``profkit_startup.pth``).
"""

from __future__ import annotations

import atexit
import os
import sys
import threading

from profkit.api.callback import ProfilerCallback
from profkit.api.errors import ProfilerApiError, UnsupportedEventError
from profkit.api.events import EventMask
from profkit.collect import backends, terminate
from profkit.collect.info import SessionInfo
from profkit.collect.select import Choice, choose
from profkit.collect.session import Session

TYPE_CHECKING = False  # typing's, without importing typing at run time (profkit run's start-up)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["AttachedSession", "attach", "current_session", "detach"]

_lock = threading.RLock()
_current: AttachedSession | None = None
_atexit_registered = False


class AttachedSession:
    """What :func:`attach` returns: the profiler's ``info`` and the backend in use."""

    def __init__(self, session: Session, choice: Choice) -> None:
        self._session = session
        self.choice = choice

    @property
    def info(self) -> SessionInfo:
        """The :class:`~profkit.api.ProfilerInfo` given to the profiler."""
        return self._session.info

    @property
    def backend(self) -> str:
        """``"monitoring"``, ``"setprofile"`` or ``"sampler"``."""
        return self.choice.name

    @property
    def profiler(self) -> ProfilerCallback:
        """The attached profiler."""
        return self._session.profiler

    @property
    def active(self) -> bool:
        """False once detached (explicitly, at exit, or after the profiler failed)."""
        return self._session.active

    def detach(self) -> None:
        """Same as :func:`profkit.collect.detach` for this session."""
        self._session.detach()


def attach(
    profiler: ProfilerCallback,
    backend: str = "auto",
    *,
    sample_interval: float = 0.001,
    sample_clock: str = "wall",
    native: bool = True,
) -> AttachedSession:
    """Attach ``profiler`` to this process and start delivering notifications.

    ``native=False`` keeps the collector in pure Python where it has a C part (the
    ``setprofile`` backend's dispatcher); the notifications are the same either way.

    Raises :class:`~profkit.api.errors.ProfilerApiError` if ``profiler`` is not a
    :class:`~profkit.api.ProfilerCallback`, a profiler is already attached, or the forced
    backend cannot serve the mask. If ``initialize`` raises, the failure is
    reported once on stderr and the returned session is already detached.
    """
    global _current, _atexit_registered
    if not isinstance(profiler, ProfilerCallback):
        raise ProfilerApiError(
            f"a {type(profiler).__module__}.{type(profiler).__qualname__} object is not a "
            "profkit.api.ProfilerCallback"
        )
    if sample_clock not in ("wall", "cpu"):
        raise ProfilerApiError(f"sample_clock must be 'wall' or 'cpu', not {sample_clock!r}")
    if not sample_interval > 0:
        raise ProfilerApiError(f"sample_interval must be > 0, not {sample_interval!r}")
    with _lock:
        if _current is not None and _current.active:
            raise ProfilerApiError(
                f"a profiler is already attached ({_current._session.profiler_name}); "
                "one profiler per process"
            )
        if backend != "auto":
            why = backends.unavailable(backend)
            if why is not None:
                raise ProfilerApiError(f"backend {backend} unavailable: {why}")
        session = Session(
            profiler,
            requested_backend=backend,
            sample_interval=sample_interval,
            sample_clock=sample_clock,
            native=native,
        )
        # initialize() runs before any hook exists; if it (or the backend choice its mask
        # leads to) fails, the failure is reported once and nothing was started, so there
        # is nothing to shut down (a CLR profiler whose Initialize fails is unloaded).
        try:
            session.initialize()
            choice = choose(backend, session.mask)
            missing = session.mask & ~backends.capabilities(choice.name).events
            if missing:
                raise UnsupportedEventError(
                    f"the {choice.name} backend cannot deliver {EventMask(missing)!r}"
                )
        except BaseException as exc:
            session.fail(exc, "initialize")
            return AttachedSession(session, Choice(backend, f"initialize failed: {exc}"))
        attached = AttachedSession(session, choice)
        _current = attached
        if not _atexit_registered:
            atexit.register(_detach_at_exit)
            _atexit_registered = True
        session.start(choice.name)
        return attached


def detach() -> None:
    """Stop the current profiler's hooks and call its ``shutdown()``; idempotent."""
    with _lock:
        current = _current
    if current is not None:
        current._session.detach()


def current_session() -> AttachedSession | None:
    """The attached session, or None."""
    current = _current
    if current is not None and current.active:
        return current
    return None


def _detach_at_exit() -> None:
    """``atexit``: the profiler's shutdown (its save) — and a Ctrl-C ending kept a Ctrl-C ending.

    python dies of SIGINT after its exit handlers when ``__main__`` ended with an uncaught
    ``KeyboardInterrupt``, but the interpreter forgets that whenever ``exec``/``eval`` of a
    *string* finishes meanwhile (CPython's ``run_eval_code_obj`` resets its flag), and a
    save imports modules that do that (``namedtuple``, ``dataclass``): the process then
    exited 1 instead (issue 22, item 11). When the program ended that way (the top level
    printed a ``KeyboardInterrupt``: ``sys.last_exc``/``sys.last_value``), the flag is set
    again afterwards, by the same route that set it.
    """
    last = getattr(sys, "last_exc", None) or getattr(sys, "last_value", None)
    try:
        detach()
    finally:
        if isinstance(last, KeyboardInterrupt):
            _end_by_sigint_again()


def _end_by_sigint_again() -> None:
    """Make the interpreter die of SIGINT at its end again: its flag is set when evaluating
    a string ends in ``KeyboardInterrupt`` (3.11–3.13 alike)."""
    try:  # noqa: SIM105 - contextlib is not imported in every profiled process for this
        exec("raise KeyboardInterrupt")
    except KeyboardInterrupt:
        pass


#: Sessions a forked child inherited and dropped. They are kept, not freed: what they
#: recorded (call trees, id tables, the hook's caches) is the parent's and shares its
#: pages until written, and freeing it writes to every one of them: a child of a parent
#: that had recorded 6,000 functions spent 2.4 M more instructions before its first line
#: (issue 22, item 13). Nothing of them is used again.
_inherited: list[AttachedSession] = []


def _after_fork_in_child() -> None:
    """A forked child: go on with the parent's profiler reset in place when the start-up
    hook attached it and would attach the same one here (``startup.resume_in_child``),
    else drop the parent's session and attach a fresh profiler if the environment asks.

    Each process gets its own profiler instance, as each CLR process loads its own.
    ``multiprocessing`` fork workers leave through ``os._exit`` (no ``atexit``), so the
    fresh session is also detached by a ``multiprocessing.util.Finalize``. A bare
    ``os.fork()`` child that ends with ``os._exit`` gets no ``shutdown``.
    """
    global _current, _lock
    # A lock another thread held at fork() stays held here forever: start afresh.
    _lock = threading.RLock()
    # Already loaded wherever the start-up hook attached (importing it ran importlib's Python).
    startup: Any = sys.modules.get("profkit.collect.startup")
    if startup is None:
        from profkit.collect import startup as loaded

        startup = loaded
    current = _current
    attached: AttachedSession | None = None
    if current is not None:
        if startup.resume_in_child(current):
            attached = current  # the same profiler, reset in place: no new session
        else:
            current._session.drop_after_fork()
            _inherited.append(current)  # never freed here: see _inherited
            _current = None
    if attached is None:
        startup._reset_after_fork()
        if startup.enabled():
            attached = startup.process_startup()
    if attached is not None:
        mp_util = sys.modules.get("multiprocessing.util")
        if mp_util is not None:
            # multiprocessing's child bootstrap clears the finalizer registry and then
            # runs its after-fork callbacks: register the finalizer from one of those.
            mp_util.register_after_fork(attached, _register_mp_finalizer)


def _register_mp_finalizer(_attached: object) -> None:
    mp_util = sys.modules.get("multiprocessing.util")
    if mp_util is not None:
        mp_util.Finalize(None, detach, exitpriority=-1000)


#: Functions profkit runs in a forked child's after-fork hooks once the session records
#: there again (see :func:`runs_in_forked_children`), and the session they were classified
#: for.
_fork_path: list[Any] = []
_classified_for: list[Any] = [None]


def runs_in_forked_children(*functions: Any) -> None:
    """Register functions (or bound methods) that profkit's own after-fork hooks run in a
    forked child going on with its parent's session: the parent classifies their code
    before its first fork (:func:`_before_fork`)."""
    _fork_path.extend(functions)
    _classified_for[0] = None


def _before_fork() -> None:
    """In the parent, before a fork (the first under this session): classify now the
    code profkit runs in the child's after-fork hooks, as profkit's own and not recorded.
    Seen first there, each took the collector's slow path, in Python, and wrote to the
    session's tables, whose pages are the parent's: 22 first sights were 0.6 M of a
    ``profkit run`` child's 1 M instructions (issue 22, item 13). Here it is done once,
    and only by a program that forks."""
    current = _current
    if current is None or _classified_for[0] is current or not current.active:
        return
    _classified_for[0] = current
    session = current._session
    classify = getattr(session.backend, "classify_ahead", None)
    if classify is None:
        return
    parts = [type(part).resume_after_fork for part in [session.backend, *session.extras] if part]
    codes = []
    for function in [*_fork_path, *parts]:
        code = getattr(getattr(function, "__func__", function), "__code__", None)
        if code is not None:
            codes.append(code)
    try:  # noqa: SIM105 - contextlib.suppress's frames would be profiled
        classify(codes)
    except Exception:  # pragma: no cover - a cost saved, never the program's failure
        pass


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_child=_after_fork_in_child)

runs_in_forked_children(_after_fork_in_child, Session.reset_after_fork, terminate.install)


def _forget(session: Session) -> None:
    """Called by a session when it detaches (so a new profiler may attach)."""
    global _current
    with _lock:
        if _current is not None and _current._session is session:
            _current = None
