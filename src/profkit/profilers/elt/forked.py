"""A forked child's profiler, reset in place (issue 22, item 13).

A child of a profiled process used to drop the parent's profiler and attach a new one:
a thousand lines of Python, whose every touched page (code objects warming up, dicts,
reference counts) the kernel copied from the parent: 5-7 ms a child on a virtual machine,
for a child that ran nothing. When the child would attach the same profiler from the same
settings anyway, the collector keeps the parent's session, hooks and tables instead, and
the profiler starts afresh here: the C recorder takes a new identity (no thread, no tree,
recording again; the parent's trees are left untouched, never freed, as freeing them wrote
every page) and the clock starts at the fork.

A child of ``profkit run`` goes on the same way with ``run``'s profiler: :func:`adopt` first
gives it what the start-up hook would have built the child's with (the settings and saver
of ``profkit.runner.activation.Handover``), so the child saves the same file as before.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from profkit.api.names import PROFKIT_MAIN

TYPE_CHECKING = False  # typing's, without importing typing at run time (profkit run's start-up)
if TYPE_CHECKING:
    from typing import Any

    from profkit.calltree.model import CallProfile
    from profkit.profilers.base import SettingsProfiler
    from profkit.profilers.elt.profiler import EltProfiler

_time_ns = time.time_ns  # bound at import, as the profiler's clock (a program may mock time)


def reset(profiler: EltProfiler) -> bool:
    """Make ``profiler`` (the parent's copy) record only this child from now; False when
    it cannot be (the collector then attaches a new profiler, as before).

    Only the C recorder without event lines is reset: the line flusher's and the UDP
    sender's threads do not exist in a child, the pure-Python recorders keep their
    stacks in ``threading.local`` objects, and a profiler that is paused, calibrating
    or already shut down is not recording the program.
    """
    recorder = profiler._recorder
    if (
        recorder is None
        or profiler._emit is not None
        or profiler._calibration is not None
        or profiler._paused
        or profiler.profile is not None
    ):
        return False
    recorder.reset_after_fork()
    profiler._lock = threading.Lock()  # another thread may have held the parent's at fork
    profiler._stacks = []
    if profiler._spans is not None:
        profiler._spans = []
    profiler._spans_dropped = 0
    profiler._closed_open_calls = 0
    profiler._started_ns = profiler._clock()
    profiler._started_wall_ns = _time_ns()
    return True


def take_settings(
    profiler: SettingsProfiler, settings: Any, on_profile: Callable[[CallProfile], None]
) -> bool:
    """Make ``profiler`` (``profkit run``'s, in a forked child) what the start-up hook builds
    there: ``from_settings(settings, on_profile)``, so no ``main_module`` and no launcher
    among the internal files. False, with nothing changed, when the collector's kept
    verdicts could then be wrong: a ``--prefix`` matched against the parent's name for the
    ``__main__`` module (``-m pkg.mod``: ``pkg.mod``) keeps functions the child's would not.
    Otherwise the verdicts are the same: the launcher's only code, its ``<module>``, is
    never entered again in the child."""
    if profiler._prefixes and profiler.main_module is not None:
        return False
    profiler.settings = settings
    profiler.on_profile = on_profile
    profiler.standalone = True
    profiler.main_module = None
    profiler.internal_files = frozenset({PROFKIT_MAIN})
    return True


def adopt(profiler: EltProfiler, settings: Any, on_profile: Callable[[CallProfile], None]) -> bool:
    """``profkit run``'s ELT profiler in a forked child, before :func:`reset`: the child's
    settings and saver (:func:`take_settings`), and nothing of the parent's run: names are
    made again without its ``main_module``, and the calibration (``run`` measures one, a
    child never did) is dropped, so the child's times are not compensated, as before."""
    if not take_settings(profiler, settings, on_profile):
        return False
    profiler._names = {}
    profiler._calibration = None
    return True
