"""Which of a memory profile's three views reports and exports show (``--metric``).

A memory profile (``mode: "memory"``, docs/profile-format.md) saves the bytes **allocated**
by stack as its trees, and the bytes alive at the **peak** and at the end (**leaked**) as
rows in ``metadata["memory_views"]``. :func:`memory_view` gives back a profile whose trees
are the chosen view, so every report and export works on it as it is: the rest of profkit
never needs to know that there are three.
"""

from __future__ import annotations

from typing import Any

from profkit.calltree.building import tree_of
from profkit.calltree.model import CallProfile, ThreadTree
from profkit.errors import UsageError

METRICS = ("alloc", "peak", "leaked")
#: ``metadata["metric"]`` of each view
METRIC_KEYS = {"alloc": "alloc_bytes", "peak": "peak_bytes", "leaked": "leaked_bytes"}


def memory_view(profile: CallProfile, metric: str, where: str = "") -> CallProfile:
    """``profile`` with the trees of ``metric`` (``alloc`` returns it as it is).

    A profile of time (trace or sample mode) has only one metric: asking it for ``peak``
    or ``leaked`` is a usage error naming the file (``where``), as is a memory profile
    whose views are missing or malformed (rows are checked: frame indices in range,
    counts non-negative integers).
    """
    if metric not in METRICS:
        raise UsageError(f"--metric must be one of {', '.join(METRICS)}, not {metric!r}")
    if metric == "alloc":
        return profile
    name = f"{where}: " if where else ""
    if profile.mode != "memory":
        raise UsageError(f"{name}--metric {metric} needs a memory profile (run --mode memory)")
    views = profile.metadata.get("memory_views")
    rows = views.get(metric) if isinstance(views, dict) else None
    if not isinstance(rows, list):
        missing = profile.metadata.get("not_available")
        why = missing.get(metric) if isinstance(missing, dict) else None
        because = f": {why}" if isinstance(why, str) else ""
        raise UsageError(f"{name}this memory profile has no {metric!r} view{because}")
    count = len(profile.frames)
    root = tree_of(
        _row(row, count, f"{name}memory_views/{metric}/{index}") for index, row in enumerate(rows)
    )
    metadata = dict(profile.metadata)
    metadata["metric"] = METRIC_KEYS[metric]
    threads = [ThreadTree(0, "all threads", root)] if rows else []
    return CallProfile("memory", list(profile.frames), threads, [], metadata)


def _row(row: Any, frames: int, where: str) -> tuple[list[int], int, int]:
    ok = (
        isinstance(row, list)
        and len(row) == 3
        and isinstance(row[0], list)
        and all(type(f) is int and 0 <= f < frames for f in row[0])
        and all(type(v) is int and 0 <= v < 2**63 for v in row[1:])
    )
    if not ok:
        raise UsageError(f"{where}: expected [[frame, ...], samples, bytes] with known frames")
    return row[0], row[1], row[2]
