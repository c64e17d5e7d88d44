"""The Firefox Profiler export's markers: a profile's timed events on its threads' tracks.

A .NET trace records the runtime's events with their time and thread (``metadata
["clr_events"]``: ``[t_ns, tid, kind, text]``, the time on the spans' clock). Each becomes a
marker of the thread that had it: a GC is an interval from its ``gc-start`` to its
``gc-end`` (category GC), an exception, a catch, a thread, module or assembly load an
instant (category .NET). Markers go only on threads whose samples are the timeline (a
tree alone is laid on a made-up clock, where real times would point nowhere); Python
profiles record no such events, so they have none.

The schema (processed format 55+: ``fields``, each with ``key`` and ``format``) shows the
event's text in the marker chart, table and tooltip.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from profkit.calltree.model import CallProfile, ThreadTree

#: Categories (indices into gecko.CATEGORIES) of the markers.
_DOTNET, _GC = 3, 4
_INSTANT, _INTERVAL = 0, 1  # the markers table's ``phase``

#: Event kind -> marker name (GCs are paired into one interval marker).
NAMES = {
    "exception": "Exception",
    "catch": "Catch",
    "thread-created": "Thread created",
    "thread-destroyed": "Thread destroyed",
    "module": "Module load",
    "assembly": "Assembly load",
}
TYPE = "profkit-event"

SCHEMAS: list[dict[str, Any]] = [
    {
        "name": TYPE,
        "display": ["marker-chart", "marker-table", "timeline-overview"],
        "chartLabel": "{marker.data.detail}",
        "tableLabel": "{marker.data.detail}",
        "tooltipLabel": "{marker.name}: {marker.data.detail}",
        "description": "An event the profiled runtime reported (profkit).",
        "fields": [{"key": "detail", "label": "Detail", "format": "string"}],
    }
]


def table(
    profile: CallProfile, thread: ThreadTree, index: int, strings: Callable[[str], int]
) -> dict[str, Any]:
    """The markers table of ``thread`` (the ``index``-th): its events, time order."""
    columns: dict[str, list[Any]] = {
        k: [] for k in ("data", "name", "startTime", "endTime", "phase", "category")
    }

    def add(name: str, start: float, end: float | None, category: int, detail: str) -> None:
        columns["data"].append({"type": TYPE, "detail": detail})
        columns["name"].append(strings(name))
        columns["startTime"].append(start)
        columns["endTime"].append(end)
        columns["phase"].append(_INSTANT if end is None else _INTERVAL)
        columns["category"].append(category)

    ids = {thread.thread_id, thread.native_id}
    known = {t.thread_id for t in profile.threads} | {t.native_id for t in profile.threads}
    gc_open: tuple[float, str] | None = None
    for event in _events(profile):
        t_ns, tid, kind, text = event
        # an event of a thread the profile does not show goes on the first thread
        if tid not in ids and (tid in known or index != 0):
            continue
        ms = t_ns / 1e6
        if kind == "gc-start":
            gc_open = (ms, text)
        elif kind == "gc-end" and gc_open is not None:
            add("GC", gc_open[0], max(ms, gc_open[0]), _GC, gc_open[1] or "GC")
            gc_open = None
        elif kind in NAMES:
            add(NAMES[kind], ms, None, _DOTNET, text)
    if gc_open is not None:  # a GC the run ended in
        add("GC", gc_open[0], None, _GC, gc_open[1] or "GC")
    return {**columns, "length": len(columns["name"])}


def _events(profile: CallProfile) -> list[tuple[int, int, str, str]]:
    """The profile's well-formed timed events, by time (anything else is skipped: the
    metadata is the recorder's, not checked by the profile loader)."""
    raw = profile.metadata.get("clr_events")
    events = []
    for e in raw if isinstance(raw, list) else ():
        if (
            isinstance(e, list)
            and len(e) == 4
            and all(isinstance(v, int) and not isinstance(v, bool) for v in e[:2])
            and all(isinstance(v, str) for v in e[2:])
        ):
            events.append((e[0], e[1], e[2], e[3]))
    events.sort(key=lambda e: e[0])
    return events
