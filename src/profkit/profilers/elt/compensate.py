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
from collections.abc import Collection
from operator import floordiv, mul, sub

from profkit.profilers.elt.calibrate import Costs

#: Columns of an exported row (elt/flat.py's layout).
COLS = 8
_PARENT, _FRAME, _CALLS, _INCL, _EXCL, _MIN, _MAX = range(7)


def compensate_rows(data: bytes, costs: Costs, c_frames: Collection[int]) -> bytes:
    """One thread's exported rows (pre-order, int64, row 0 the root) with the costs taken
    out; ``c_frames`` says which frame indices are C functions.

    Column at a time, in whole nanoseconds, with ``map`` over slices of the row array: a
    long run's tree has ~100,000 rows and this runs at the end of every run, so only the
    two passes that follow the tree's shape (a parent's share, the inclusive sums) run a
    Python statement per row.
    """
    rows = array("q")
    rows.frombytes(data)
    n = len(rows) // COLS
    if n <= 1:
        return data
    frames = rows[COLS + _FRAME :: COLS]
    parents = rows[COLS + _PARENT :: COLS]
    calls = rows[COLS + _CALLS :: COLS]
    # Each frame's costs (the C functions' differ), then each row's.
    py_in, py_out = round(costs.python_callee), round(costs.python_caller)
    cost_in: dict[int, int] = dict.fromkeys(frames, py_in)
    cost_out: dict[int, int] = dict.fromkeys(frames, py_out)
    for frame in c_frames:
        if frame in cost_in:
            cost_in[frame], cost_out[frame] = round(costs.c_callee), round(costs.c_caller)
    own = [0, *map(sub, rows[COLS + _EXCL :: COLS], map(mul, calls, map(cost_in.get, frames)))]
    outs = list(map(mul, calls, map(cost_out.get, frames)))
    # One pass from the last row up (pre-order: a node's children all come after it, so
    # when a row is reached its own time is final): clamp it, sum the inclusive times
    # (whole nanoseconds: inclusive = self + children's inclusive holds exactly), and
    # charge its callers' cost to its parent.
    excl = [0] * n
    incl = [0] * n
    for at, p, out in zip(range(n - 1, 0, -1), reversed(parents), reversed(outs), strict=True):
        e = own[at]
        if e < 0:
            e = 0
        excl[at] = e
        e += incl[at]
        incl[at] = e
        incl[p] += e
        own[p] -= out
    # A call's shortest and longest durations shrink as its node's inclusive time did.
    new = incl[1:]
    old = [v or 1 for v in rows[COLS + _INCL :: COLS]]
    for column in (_MIN, _MAX):
        values = rows[COLS + column :: COLS]
        rows[COLS + column :: COLS] = array("q", map(floordiv, map(mul, values, new), old))
    rows[COLS + _EXCL :: COLS] = array("q", excl[1:])
    rows[COLS + _INCL :: COLS] = array("q", new)
    rows[_INCL] = incl[0]  # the root's inclusive time is its children's (elt/flat.c)
    return rows.tobytes()
