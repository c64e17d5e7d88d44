"""How a program ended, and how to end the way it did.

``python`` ends in one of four ways, and ``profkit run`` must end the same way *after*
saving the profile: a status (normal end, ``SystemExit``), an uncaught exception (printed
by ``sys.excepthook``, status 1), or death by a signal — Ctrl-C (an uncaught
``KeyboardInterrupt``: python prints the traceback, runs its exit handlers, then kills
itself with SIGINT, so a shell sees status 130 and a parent ``-2``) or SIGTERM (python
simply dies: ``-15``). :class:`Outcome` records which; :func:`exit_signal` says which
signal the caller should die of once its own work is done.
"""

from __future__ import annotations

# signal.py's enums cost ~3 M instructions at import (every run's start-up): the C module's ints.
import _signal  # type: ignore[import-not-found]
import sys

# Outcome is part of the engine contract (engines build it without importing the runner).
from profkit.engine.contract import Outcome, outcome_of_returncode

__all__ = [
    "Outcome",
    "Terminated",
    "exit_signal",
    "outcome_of",
    "outcome_of_returncode",
    "report_exception",
    "status_of",
]


class Terminated(SystemExit):
    """Raised in the main thread by the runner's SIGTERM handler, so ``finally`` blocks run
    and the profile is saved; the runner then dies of SIGTERM itself."""


def outcome_of(ended: BaseException | None) -> Outcome:
    """The :class:`Outcome` for what the program's main code raised (``None``: it returned)."""
    if ended is None:
        return Outcome(0)
    if isinstance(ended, Terminated):
        return Outcome(128 + _signal.SIGTERM, system_exit=ended, terminated=True)
    if isinstance(ended, SystemExit):
        return Outcome(status_of(ended), system_exit=ended)
    if isinstance(ended, KeyboardInterrupt):
        return Outcome(128 + _signal.SIGINT, exception=ended, interrupted=True)
    return Outcome(1, exception=ended)


def status_of(exc: SystemExit) -> int:
    """The exit status ``python`` gives ``raise SystemExit(code)``."""
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF  # what the OS reports for exit(-1), exit(256), ...
    return 1


def exit_signal(outcome: Outcome) -> int | None:
    """The signal to die of, as the program did (SIGINT, SIGTERM; any signal that killed a
    program run as a child), else ``None``."""
    if outcome.terminated:
        return int(_signal.SIGTERM)
    if outcome.interrupted:
        return int(_signal.SIGINT)
    return outcome.died_of


def report_exception(outcome: Outcome) -> None:
    """Print the program's uncaught exception as the interpreter would (``sys.excepthook``)."""
    exc = outcome.exception
    if exc is not None:
        sys.excepthook(type(exc), exc, exc.__traceback__)
