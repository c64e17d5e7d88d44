"""Chrome trace event JSON (Perfetto UI, chrome://tracing, viztracer's vizviewer).

Uses the JSON object form ``{"traceEvents": [...]}`` with complete (``"ph": "X"``)
events, timestamps in microseconds as the format requires, and ``thread_name`` metadata
events. From the timeline of spans when the profile has one; otherwise the tree is laid
out as a synthetic timeline (children one after another from their parent's start), and
each event says so in ``args.synthetic``: the widths are real totals, the order is not.
"""

from __future__ import annotations

import json
from typing import Any

from profkit.calltree.model import CallNode, CallProfile
from profkit.export._meta import command_line
from profkit.export.speedscope import nested_events


def write(profile: CallProfile) -> bytes:
    """The profile as Chrome trace event JSON (UTF-8)."""
    pid = profile.metadata.get("pid")
    pid = pid if type(pid) is int else 1
    names = [f.name for f in profile.frames]
    command = command_line(profile)
    title = "profkit" if command is None else command
    events: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": title}},
    ]
    for index, thread in enumerate(profile.threads):
        tid = thread.thread_id
        events.append(
            {
                "ph": "M",
                "name": "thread_name",
                "pid": pid,
                "tid": tid,
                "args": {"name": thread.name},
            }
        )
        spans = [s for s in profile.spans if s.thread == index]
        if spans:
            events.extend(_from_spans(spans, names, pid, tid))
        else:
            events.extend(_synthesised(thread.root, names, pid, tid))
    doc = {
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "otherData": {"profkit_mode": profile.mode},
    }
    return json.dumps(doc, separators=(",", ":")).encode("utf-8")


def _from_spans(spans: list[Any], names: list[str], pid: int, tid: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    opened: list[tuple[int, int]] = []
    for kind, at, frame in nested_events(spans):
        if kind == "O":
            opened.append((frame, at))
            continue
        frame, start = opened.pop()
        out.append(
            {
                "ph": "X",
                "name": names[frame],
                "cat": "call",
                "pid": pid,
                "tid": tid,
                "ts": start / 1000,
                "dur": (at - start) / 1000,
            }
        )
    out.sort(key=lambda e: e["ts"])
    return out


def _synthesised(root: CallNode, names: list[str], pid: int, tid: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    stack: list[tuple[CallNode, int]] = [(root, 0)]
    while stack:
        node, start = stack.pop()
        offset = start
        for child in node.children.values():
            out.append(
                {
                    "ph": "X",
                    "name": names[child.frame],
                    "cat": "call",
                    "pid": pid,
                    "tid": tid,
                    "ts": offset / 1000,
                    "dur": child.inclusive_ns / 1000,
                    "args": {
                        "calls": child.calls,
                        "self_ns": child.exclusive_ns,
                        "synthetic": True,
                    },
                }
            )
            stack.append((child, offset))
            offset += child.inclusive_ns
    out.sort(key=lambda e: e["ts"])
    return out
