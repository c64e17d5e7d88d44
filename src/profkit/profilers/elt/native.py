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

from collections.abc import Callable
from typing import Any

from profkit.errors import SettingsError
from profkit.profilers.elt.tree import Node

_IMPORT_ERROR: str | None = None
try:
    from profkit.profilers.elt import _native
except ImportError as exc:  # not built here: pure Python
    _IMPORT_ERROR = str(exc)

#: The C recorder class, or None where it was not built (tests set None to hide it).
Recorder: type[_native.Recorder] | None = None if _IMPORT_ERROR else _native.Recorder
#: ``rows_json(rows, start=0, stop=None) -> bytes``: rows [start, stop) of export_flat's
#: rows as saved-file JSON, or None (not built).
rows_json: Callable[..., bytes] | None = None if _IMPORT_ERROR else _native.rows_json
#: ``compensate_rows(rows, c_mask, python_callee, python_caller, c_callee, c_caller)``:
#: elt/compensate.py's rule in place on export_flat's rows, or None (not built).
compensate_rows: Callable[..., None] | None = None if _IMPORT_ERROR else _native.compensate_rows

#: One exported thread: (token from ``new_thread``, pre-order rows
#: ``(parent index, fid, calls, incl, min, max)``; row 0 is the root).
ExportedThread = tuple[Any, list[tuple[int, int, int, int, int, int]]]


def available() -> bool:
    """Whether the C recorder was built for this interpreter."""
    return Recorder is not None


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
