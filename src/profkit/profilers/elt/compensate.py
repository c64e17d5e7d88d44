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
  in the proportion of its inclusive time.

Calls the recorder never counted (shorter than the base time, made by filtered-out
code, calls of classes) are not compensated: their cost stays where it landed.
"""

from __future__ import annotations

from array import array
from collections.abc import Container

from profkit.profilers.elt.calibrate import Costs

#: Columns of an exported row (elt/flat.py's layout).
COLS = 8
_PARENT, _FRAME, _CALLS, _INCL, _EXCL, _MIN, _MAX = range(7)


def compensate_rows(data: bytes, costs: Costs, c_frames: Container[int]) -> bytes:
    """One thread's exported rows (pre-order, int64, row 0 the root) with the costs taken
    out; ``c_frames`` says which frame indices are C functions."""
    rows = array("q")
    rows.frombytes(data)
    n = len(rows) // COLS
    if n <= 1:
        return data
    excl = [0.0] * n
    for at in range(1, n):
        b = at * COLS
        calls = rows[b + _CALLS]
        if rows[b + _FRAME] in c_frames:
            callee, caller = costs.c_callee, costs.c_caller
        else:
            callee, caller = costs.python_callee, costs.python_caller
        excl[at] += rows[b + _EXCL] - calls * callee
        parent = rows[b + _PARENT]
        if parent > 0:
            excl[parent] -= calls * caller
    # Whole nanoseconds, so that inclusive = self + children's inclusive holds exactly.
    own = [max(round(e), 0) for e in excl]
    incl = own[:]
    for at in range(n - 1, 0, -1):  # pre-order: every child comes after its parent
        parent = rows[at * COLS + _PARENT]
        if parent > 0:
            incl[parent] += incl[at]
    total = 0
    for at in range(1, n):
        b = at * COLS
        old_incl = rows[b + _INCL]
        scale = incl[at] / old_incl if old_incl > 0 else 0.0
        rows[b + _EXCL] = own[at]
        rows[b + _INCL] = incl[at]
        rows[b + _MIN] = round(rows[b + _MIN] * scale)
        rows[b + _MAX] = round(rows[b + _MAX] * scale)
        if rows[b + _PARENT] == 0:
            total += incl[at]
    if rows[_INCL] >= 0:
        # The root: its inclusive time is its children's (elt/flat.c), its self time 0.
        rows[_INCL] = total
    return rows.tobytes()
