"""Taking the profiler's own cost per call out of the recorded times, where it landed.

Why here, on the exported rows, and not in the reports: the saved profile is then right
for every reader (the flat and tree reports, pstats, speedscope, the HTML flame graph)
and says so in its metadata (``compensation``); a report never has to know how the
profile was recorded. The costs come from :mod:`~profkit.profilers.elt.calibrate`.

The rule, for every node with ``calls`` recorded calls of a Python or a C function:

* its self time loses ``calls × callee cost`` (the recorder's work between its two
  clock reads, inside the call);
* its parent's self time loses ``calls × caller cost`` (the work before the first read
  and after the last, and the caller's own ``CALL`` event on 3.12+);
* neither goes below zero; inclusive times are then the compensated self time plus the
  children's compensated inclusive times, and a node's shortest and longest call shrink
  in the proportion of its inclusive time;
* all in whole nanoseconds: each cost is rounded to one, and a shortest or longest call
  becomes ``value × new inclusive // old inclusive``.

Calls the recorder never counted (shorter than the base time, made by filtered-out
code, calls of classes) are not compensated: their cost stays where it landed.

The rule runs in C, in place on the exported rows (``csrc/compensate.c``): done in Python
it held ~180 bytes a row on top of the rows at the end of the run, the run's peak memory
(issue #11). ``tests/profilers/elt/test_compensate.py`` keeps the rule in Python as the
model the C code must match number for number.
"""

from __future__ import annotations

from collections.abc import Collection

from profkit.profilers.elt import native
from profkit.profilers.elt.calibrate import Costs


def compensate_rows(rows: bytearray, costs: Costs, c_frames: Collection[int]) -> None:
    """Take the costs out of one thread's exported rows (pre-order, row 0 the root),
    in place; ``c_frames`` are the frame indices of C functions."""
    compensate = native.compensate_rows
    assert compensate is not None  # rows only come from the C recorder's export
    mask = bytearray(max(c_frames) + 1 if c_frames else 0)
    for f in c_frames:
        mask[f] = 1
    compensate(rows, mask, costs.python_callee, costs.python_caller, costs.c_callee, costs.c_caller)
