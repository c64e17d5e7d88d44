"""SIGTERM in a profiled process that would die of it: save the profile, then die of it.

Why: ``multiprocessing`` ends workers with SIGTERM — ``Pool.__exit__`` calls
``terminate()``, and so does ``Process.terminate()`` — and a worker whose SIGTERM is at the
default dies at once, its profile with it. ``with Pool(3) as pool: pool.map(...)``, the
usual idiom, left no worker profile: only the parent's wait for results was seen.

How: in a process attached through the environment (:mod:`profkit.collect.startup`:
``multiprocessing`` workers, subprocesses, any ``PROFKIT_ENABLE_PROFILING=1`` process),
when the program has left SIGTERM at its default, the main thread gets
:func:`_save_and_die`: it detaches the session (the profiler saves), puts back the default
and re-sends SIGTERM, so the process dies of it with the exit status the bare program
would have. A program that sets its own handler replaces this one, as it would the
default. A SIGTERM that lands while the profile is already being saved (a worker leaving
normally saves from ``multiprocessing``'s finalizers, and ``Pool.terminate()`` can reach
it right then) waits for that save to end instead of cutting it off.

The handler never raises. Raising into the program (as ``profkit run``'s own main-process
handler does, so that ``finally`` blocks run) is wrong here: an exception can be swallowed
— by an after-fork hook, a bare ``except`` in a worker loop — and leave the process alive,
which is how ``Pool.terminate()`` once waited forever (issue #17).

A Python handler runs only between bytecodes, so a process inside a long C call would
outlive the signal that kills the bare program at once. ``_termguard`` (C, optional)
arms deadlines when SIGTERM arrives: if the Python handler has not started within
:data:`FIRST_CPU_DEADLINE` seconds of the process's CPU time (busy in C) or
:data:`FIRST_WALL_DEADLINE` seconds of wall time (blocked in C), the process dies of
SIGTERM unsaved, as the bare program would have, only later. Once started, the handler gives the save :data:`SAVE_DEADLINE`
seconds, so a save that cannot finish (a lock the interrupted code held) cannot keep the
process alive either. Without the C module only the save deadline holds.

Only ``_signal`` (built in) is imported: this module is loaded in every profiled process,
and ``signal.py`` would bring ``enum`` with it.
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]
import os
from types import FrameType

TYPE_CHECKING = False  # typing's, without importing typing at run time (profkit run's start-up)
if TYPE_CHECKING:
    from typing import Any

try:  # optional like profkit's other C paths
    from profkit.collect import _termguard
except ImportError:  # pragma: no cover - a build without a compiler
    _termguard: Any = None  # type: ignore[no-redef]

#: Seconds of the process's CPU time a SIGTERM may wait for the Python handler to start
#: before it kills unsaved (a process busy in one C call).
FIRST_CPU_DEADLINE = 1.0
#: Seconds of wall time the same (a process blocked in C; longer, so that a process only
#: starved of CPU on a loaded machine is not killed before its handler could run).
FIRST_WALL_DEADLINE = 10.0
#: Seconds the started handler gives the save before the process dies anyway.
SAVE_DEADLINE = 60.0

_TERM: int = _signal.SIGTERM
_DEFAULT: int = _signal.SIG_DFL
#: Saves under way in this process (a session's shutdown), and a SIGTERM waiting for them.
_saving = 0
_die_when_saved = False


def install() -> bool:
    """Make SIGTERM save before it kills, if the program left it at the default.

    Main thread only (``signal.signal``'s rule); True when the handler is in place. An
    inherited one (a forked child of a saving process) is installed afresh, so that the
    deadline timer, which fork() does not copy, exists in this process too.
    """
    global _saving, _die_when_saved
    # No threading calls: in a forked child this runs while the child's fresh session
    # records, and whatever Python function it calls would be in the child's profile.
    # _signal.signal itself refuses other threads (ValueError).
    try:
        current = _signal.getsignal(_TERM)
        if current != _DEFAULT and current is not _save_and_die:
            return False
        _signal.signal(_TERM, _save_and_die)
    except (ValueError, OSError):
        return False
    _saving, _die_when_saved = 0, False  # a forked child's copy of the parent's count
    if _termguard is not None:
        try:  # noqa: SIM105 - contextlib is not imported in every profiled process for this
            _termguard.install(FIRST_CPU_DEADLINE, FIRST_WALL_DEADLINE)
        except OSError:
            pass  # no timer here: the save deadline still holds
    return True


def installed() -> bool:
    """Whether SIGTERM is currently this module's save-then-die handler."""
    return _signal.getsignal(_TERM) is _save_and_die


def saving_began() -> None:
    """A session's shutdown (the profile's save) starts in this process."""
    global _saving
    _saving += 1


def saving_ended() -> None:
    """That save is over: a SIGTERM that arrived meanwhile kills now."""
    global _saving
    _saving -= 1
    if _saving <= 0 and _die_when_saved and installed():
        die_of(_TERM)


def _save_and_die(signum: int, frame: FrameType | None) -> None:
    global _die_when_saved
    if _termguard is not None:
        try:  # noqa: SIM105 - as in install()
            _termguard.extend(SAVE_DEADLINE)
        except OSError:
            pass
    if _saving > 0:  # interrupted the save itself: saving_ended() kills when it is done
        _die_when_saved = True
        return
    try:
        from profkit import collect

        collect.detach()  # the profiler's shutdown saves; its failures are reported there
    except BaseException:  # dying of SIGTERM comes first, whatever happened
        pass
    die_of(_TERM)


def die_of(signum: int) -> None:
    """End this process by ``signum`` (after the caller has saved and flushed everything).

    The disposition is reset to the default and the signal unblocked first, so it cannot be
    caught or ignored; returns only if the process somehow survived it. ``profkit run``'s
    own ending (:func:`profkit.runner.signals.die_of`) is this function too.
    """
    try:
        _signal.signal(signum, _DEFAULT)
        _signal.pthread_sigmask(_signal.SIG_UNBLOCK, (signum,))
    except (ValueError, OSError):  # pragma: no cover - not the main thread
        pass
    os.kill(os.getpid(), signum)
