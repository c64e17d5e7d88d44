"""Trace mode's optional C hot path: loading it, and turning its trees back into ``Node``\\s.

The C :class:`Recorder` (``csrc/*.c``) does what :mod:`~profkit.profilers.elt.trace`
and :mod:`~profkit.profilers.elt.lines` do — per-thread stacks of call-tree paths, one
clock read on each side of a call, the base time, event lines with held ``Enter`` lines,
the timeline — by the same rules (property tests compare the two), but in C; and its
``py_start``/``py_resume``/``py_return``/``py_yield`` methods are shaped like
``sys.monitoring`` callbacks, so the collector registers them directly (the
``__profkit_monitoring__`` protocol, docs/api.md).

The extension is built at install time (``hatch_build.py``); where it is missing, profkit
runs in pure Python. ``PROFKIT_NATIVE=off`` forces pure Python, ``on`` makes a missing
build an error instead of a silent slowdown.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable

from profkit.api import CallEvents
from profkit.api.ids import FunctionId
from profkit.errors import SettingsError
from profkit.profilers.elt.tree import Node

TYPE_CHECKING = False  # typing's, without importing typing at run time (profkit run's start-up)
if TYPE_CHECKING:
    from typing import Any


def import_failure(exc: ImportError) -> str:
    """Why the C module did not load, in words for a user.

    A module that was never built makes Python say "cannot import name '_native' from
    partially initialized module ... (most likely due to a circular import)": true to
    Python, misleading to a user. Say what happened instead; keep any other load error.
    """
    if "circular import" in str(exc) or "No module named" in str(exc):
        return "it was not built when profkit was installed (no C compiler or Python headers)"
    return str(exc)


_IMPORT_ERROR: str | None = None
try:
    from profkit.profilers.elt import _native
except ImportError as exc:  # not built here: pure Python
    _IMPORT_ERROR = import_failure(exc)

#: The C recorder class, or None where it was not built (tests set None to hide it).
Recorder: type[_native.Recorder] | None = None if _IMPORT_ERROR else _native.Recorder
#: ``rows_json(rows, start=0, stop=None) -> bytes``: rows [start, stop) of export_flat's
#: rows as saved-file JSON, or None (not built).
rows_json: Callable[..., bytes] | None = None if _IMPORT_ERROR else _native.rows_json
#: ``compensate_rows(rows, c_mask, python_callee, python_caller, c_callee, c_caller)``:
#: elt/compensate.py's rule in place on export_flat's rows, or None (not built).
compensate_rows: Callable[..., None] | None = None if _IMPORT_ERROR else _native.compensate_rows
#: ``frame_sums(frames, values, skip=None, parents=None, wanted=None, under_root=None)
#: -> dict``: sums of a column of export_flat's rows by frame (csrc/rowsums.c), or None.
frame_sums: Callable[..., dict[int, int]] | None = None if _IMPORT_ERROR else _native.frame_sums
#: ``renumber_frames(frames, table)``: the rows' frame column through ``table``, in place,
#: or None (not built).
renumber_frames: Callable[..., None] | None = None if _IMPORT_ERROR else _native.renumber_frames

#: One exported thread: (token from ``new_thread``, pre-order rows
#: ``(parent index, fid, calls, incl, min, max)``; row 0 is the root).
ExportedThread = tuple["Any", list[tuple[int, int, int, int, int, int]]]


def available() -> bool:
    """Whether the C recorder was built for this interpreter."""
    return Recorder is not None


def missing_note(native: str) -> str | None:
    """The line ``profkit run`` says at the end when trace mode fell back to pure Python on
    its own (``auto``): pip hides the build's warning unless ``-v``, so without this a user
    only sees a slow profile. None when the C recorder is here or was refused (``off``)."""
    if Recorder is not None or native != "auto":
        return None
    return (
        f"profkit: note: trace mode's C hot path is missing: {_IMPORT_ERROR}; this run used "
        "the pure-Python recorder, several times slower (reinstall profkit with gcc and the "
        "Python headers, e.g. apt-get install gcc python3-dev; PROFKIT_NATIVE=off hides this)\n"
    )


def wanted(native: str) -> bool:
    """Whether to use the C recorder under the ``native`` setting (auto/on/off)."""
    if native == "off":
        return False
    if Recorder is None:
        if native == "on":
            raise SettingsError(
                f"PROFKIT_NATIVE=on: trace mode's C hot path is not built here ({_IMPORT_ERROR}); "
                "reinstall profkit with a C compiler, or use PROFKIT_NATIVE=auto"
            )
        return False
    return True


#: Whether the C recorder's own ``CLOCK_MONOTONIC`` reads equal ``perf_counter_ns``'s.
_PERF_COUNTER_IS_MONOTONIC = (
    time.get_clock_info("perf_counter").implementation == "clock_gettime(CLOCK_MONOTONIC)"
)


def recorder(
    new_thread: Callable[[], object],
    name: Callable[[FunctionId], str],
    basetime: int,
    clock: Callable[[], int] | None,
    *,
    emit: Callable[[str], None] | None,
    unit: str,
    span_cap: int,
) -> Any:
    """A C recorder for a profiler: ``new_thread`` answers its first event on each thread,
    ``name`` names functions for event lines. It reads ``CLOCK_MONOTONIC`` itself when
    ``clock`` is None and that is what :func:`time.perf_counter_ns` reads (so its times
    compare with the profiler's); any other clock (a test's) is called.

    It reaches back weakly: its c_call/c_return are sys.monitoring callbacks (a
    process-wide registry), so a strong reference to the profiler would keep it, and its
    C-call tool id, alive forever once dropped without detaching.
    """
    assert Recorder is not None  # only called when it was built
    if clock is None and not _PERF_COUNTER_IS_MONOTONIC:
        clock = time.perf_counter_ns
    return Recorder(
        _weakly(new_thread),
        basetime,
        clock=clock,
        emit=emit,
        name=_weakly(name),
        unit=unit,
        span_cap=span_cap,
    )


def call_events(recorder: Any) -> CallEvents:
    """The C recorder's callbacks, bound by the collector as they are."""
    return CallEvents(
        function_enter=recorder.enter,
        function_leave=recorder.leave,
        function_yield=recorder.yield_,
        function_resume=recorder.resume,
    )


def _weakly(method: Callable[..., Any]) -> Callable[..., Any]:
    """``method`` called through a weak reference to its object (None once it is gone)."""
    ref = weakref.WeakMethod(method)

    def call(*args: Any) -> Any:
        target = ref()
        return None if target is None else target(*args)

    return call


def tree_of(rows: list[tuple[int, int, int, int, int, int]]) -> Node:
    """Rebuild a capture tree from the recorder's flat pre-order rows (iteratively)."""
    nodes: list[Node] = []
    for parent, fid, calls, incl, lo, hi in rows:
        node = Node(fid if parent >= 0 else None)
        node.calls, node.incl, node.min, node.max = calls, incl, lo, hi
        if parent >= 0:
            nodes[parent].children[fid] = node
        nodes.append(node)
    return nodes[0]
