"""SIGTERM while a program runs in-process: save the profile, then die of it as python would.

``python`` dies of SIGTERM at once. Under ``profkit run`` the profile must be saved first,
so the main thread gets a handler that raises :class:`~profkit.runner.outcome.Terminated`
(a ``SystemExit``: ``finally`` blocks run, the runner saves, then re-sends SIGTERM to
itself). That handler must never reach a *forked* child: a ``multiprocessing`` fork worker
that inherited it turned ``Pool.terminate()``'s SIGTERM into an exception — swallowed if it
arrived while the worker was still inside an after-fork hook — and the parent waited for
it forever (issue #17, item 1).

So around every ``os.fork()`` while the handler is installed: SIGTERM is *blocked* in the
forking thread just before the fork (the child inherits the blocked mask, so no handler of
ours can run in it, however early the signal comes); the child puts back the disposition
the program had before ``profkit run`` (normally the default) and only then unblocks, so a
pending SIGTERM kills it exactly as it would kill a bare python child; the parent just
unblocks, and a SIGTERM that arrived meanwhile is delivered to it as usual.
"""

from __future__ import annotations

# The C functions, not signal.py's wrappers: the fork hooks run while the program is
# profiled (the wrappers would show up in its profile), and signal.py builds three enums
# at import (~3 M instructions of every profkit run's start-up; issue #26).
import _signal  # type: ignore[import-not-found]
import os
import threading
from types import FrameType

import profkit.collect as _collect  # bound at import: the child records when the hook runs
from profkit.collect import terminate as _terminate
from profkit.runner.outcome import Terminated

TYPE_CHECKING = False  # typing's, without importing typing at run time (profkit run's start-up)
if TYPE_CHECKING:
    from typing import Any

_TERM = int(_signal.SIGTERM)
#: The disposition before ours (restored at the end and in forked children); None: not ours.
_previous: Any = None
_fork_hooks_registered = False
_blocked_for_fork = threading.local()


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise Terminated(128 + signum)


def install() -> bool:
    """Install the SIGTERM handler (main thread only); True if it is now ours."""
    global _previous, _fork_hooks_registered
    if threading.current_thread() is not threading.main_thread():
        return False
    try:
        previous = _signal.signal(_TERM, _on_sigterm)
    except (ValueError, OSError):
        return False
    # SIG_DFL/SIG_IGN come as plain ints from the C function, as the fork hook gives them back.
    _previous = int(_signal.SIG_DFL) if previous is None else previous
    if isinstance(_previous, int):
        _previous = int(_previous)
    if not _fork_hooks_registered and hasattr(os, "register_at_fork"):
        os.register_at_fork(
            before=_before_fork,
            after_in_parent=_after_fork_in_parent,
            after_in_child=_after_fork_in_child,
        )
        _fork_hooks_registered = True
        # what the child runs in them: classified by the parent (collect._before_fork)
        _collect.runs_in_forked_children(
            _after_fork_in_child, installed, _save_before_dying_if_profiled, _terminate.install
        )
    return True


def uninstall() -> None:
    """Put back the disposition from before :func:`install`, if the handler is still ours
    (a program that installed its own SIGTERM handler keeps it)."""
    global _previous
    previous, _previous = _previous, None
    if previous is None:
        return
    try:
        if _signal.getsignal(_TERM) is _on_sigterm:
            _signal.signal(_TERM, previous)
    except (ValueError, OSError):
        pass


def installed() -> bool:
    """Whether SIGTERM currently raises :class:`Terminated` (the program may have replaced it)."""
    return _previous is not None and _signal.getsignal(_TERM) is _on_sigterm


def _before_fork() -> None:
    if installed():
        _signal.pthread_sigmask(_signal.SIG_BLOCK, (_TERM,))
        _blocked_for_fork.active = True


def _after_fork_in_parent() -> None:
    if getattr(_blocked_for_fork, "active", False):
        _blocked_for_fork.active = False
        _signal.pthread_sigmask(_signal.SIG_UNBLOCK, (_TERM,))


def _after_fork_in_child() -> None:
    global _previous
    if not getattr(_blocked_for_fork, "active", False):
        return
    _blocked_for_fork.active = False
    previous, _previous = _previous, None
    try:
        if previous is not None and _signal.getsignal(_TERM) is _on_sigterm:
            _signal.signal(_TERM, previous)
            if previous == int(_signal.SIG_DFL):
                _save_before_dying_if_profiled()
    except (ValueError, OSError):  # pragma: no cover - the forking thread is the child's main
        pass
    finally:
        _signal.pthread_sigmask(_signal.SIG_UNBLOCK, (_TERM,))


def _save_before_dying_if_profiled() -> None:
    """A forked child profiled afresh (collect's fork hook ran first) whose program left
    SIGTERM at the default: SIGTERM saves its profile and then kills it (the handler
    never raises, see :mod:`profkit.collect.terminate`), where the default would lose the
    profile of every ``with Pool(...)`` worker."""
    if _collect.current_session() is not None:
        _terminate.install()


#: End this process by a signal, as python would (shared with the SIGTERM handler of
#: environment-profiled processes: :func:`profkit.collect.terminate.die_of`).
die_of = _terminate.die_of
