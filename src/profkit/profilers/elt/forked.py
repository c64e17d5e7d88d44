"""A forked child's profiler, reset in place (issue 22, item 13).

A child of a profiled process used to drop the parent's profiler and attach a new one:
a thousand lines of Python, whose every touched page (code objects warming up, dicts,
reference counts) the kernel copied from the parent: 5-7 ms a child on a virtual machine,
for a child that ran nothing. When the child would attach the same profiler from the same
settings anyway, the collector keeps the parent's session, hooks and tables instead, and
the profiler starts afresh here: the C recorder takes a new identity (no thread, no tree,
recording again; the parent's trees are left untouched, never freed, as freeing them wrote
every page) and the clock starts at the fork.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
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
