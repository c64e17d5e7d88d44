"""speedscope JSON (https://www.speedscope.app/file-format-schema.json).

Follows ``src/lib/file-format-spec.ts`` of jlfwong/speedscope (checked at commit
5236f55): one profile per thread, ``evented`` (open/close events in time order) when the
profile carries a timeline of spans, otherwise ``sampled`` from the tree, each distinct
call path weighted by its self time. Units are nanoseconds.
"""

from __future__ import annotations

import json
from typing import Any

from profkit import __version__
from profkit.calltree.model import CallProfile, Span
from profkit.export._meta import command_line
from profkit.report.tree import walk

SCHEMA = "https://www.speedscope.app/file-format-schema.json"


def write(profile: CallProfile) -> bytes:
    """The profile as a speedscope file (UTF-8 JSON)."""
    frames: list[dict[str, Any]] = []
    for f in profile.frames:
        item: dict[str, Any] = {"name": f.name}
        if f.file:
            item["file"] = f.file
        if f.line:
            item["line"] = f.line
        frames.append(item)
    by_thread: list[list[Span]] = [[] for _ in profile.threads]
    for span in profile.spans:
        by_thread[span.thread].append(span)
    profiles = [
        _evented(name, spans) if spans else _sampled(profile, index, name)
        for index, (thread, spans) in enumerate(zip(profile.threads, by_thread, strict=True))
        for name in [f"{thread.name} (id {thread.thread_id})"]
    ]
    doc = {
        "$schema": SCHEMA,
        "shared": {"frames": frames},
        "profiles": profiles,
        "name": _title(profile),
        "activeProfileIndex": 0,
        "exporter": f"profkit {__version__}",
    }
    return json.dumps(doc, separators=(",", ":")).encode("utf-8")


def _title(profile: CallProfile) -> str:
    command = command_line(profile)
    return "profkit profile" if command is None else f"profkit: {command}"


def nested_events(spans: list[Span]) -> list[tuple[str, int, int]]:
    """Balanced ``(type, at, frame)`` events in time order from possibly untidy spans.

    A span that ends after its enclosing span is clipped to it, so opens and closes
    always nest (speedscope and Chrome both reject or garble unbalanced input).
    """
    events: list[tuple[str, int, int]] = []
    open_: list[tuple[int, int]] = []  # (frame, end)
    for s in sorted(spans, key=lambda s: (s.start_ns, s.depth, -s.end_ns)):
        while open_ and open_[-1][1] <= s.start_ns:
            frame, end = open_.pop()
            events.append(("C", end, frame))
        end = min(s.end_ns, open_[-1][1]) if open_ else s.end_ns
        events.append(("O", s.start_ns, s.frame))
        open_.append((s.frame, end))
    while open_:
        frame, end = open_.pop()
        events.append(("C", end, frame))
    return events


def _evented(name: str, spans: list[Span]) -> dict[str, Any]:
    events = nested_events(spans)
    start = events[0][1]
    return {
        "type": "evented",
        "name": name,
        "unit": "nanoseconds",
        "startValue": start,
        "endValue": max(at for _, at, _ in events),
        "events": [{"type": t, "at": at, "frame": frame} for t, at, frame in events],
    }


def _sampled(profile: CallProfile, thread_index: int, name: str) -> dict[str, Any]:
    samples: list[list[int]] = []
    weights: list[int] = []
    for _depth, node, path in walk(profile.threads[thread_index].root):
        if node.frame >= 0 and node.exclusive_ns > 0:
            samples.append([*path, node.frame])
            weights.append(node.exclusive_ns)
    return {
        "type": "sampled",
        "name": name,
        "unit": "nanoseconds",
        "startValue": 0,
        "endValue": sum(weights),
        "samples": samples,
        "weights": weights,
    }
