"""speedscope JSON (https://www.speedscope.app/file-format-schema.json).

Follows ``src/lib/file-format-spec.ts`` of jlfwong/speedscope (checked at commit
5236f55): one ``evented`` profile (open/close events in time order) per thread. With a
timeline of spans the events are the real calls; without one the tree is laid out as a
synthetic timeline (children one after another from their parent's start, clipped to
it), so the flame graph and the "left heavy" view show the tree's real totals. Units
are nanoseconds.

Written as a stream (:func:`write_to`): two events per tree node, memory bounded by the
depth. A ``sampled`` profile would repeat the whole stack in every sample, quadratic in
depth (a 20,000-deep recursion wrote 600 MB and took 3 GB). Frames carry only
``name``, ``file`` and ``line``, so identical functions share one frame.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any, BinaryIO

from profkit import __version__
from profkit.calltree.model import CallNode, CallProfile, Span
from profkit.export._meta import command_line, thread_label

SCHEMA = "https://www.speedscope.app/file-format-schema.json"
_FLUSH_BYTES = 1 << 20


def write_to(profile: CallProfile, out: BinaryIO) -> None:
    """Stream the profile as a speedscope file (UTF-8 JSON) to ``out``."""
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
    dumps = json.dumps
    out.write(
        b'{"$schema":%s,"shared":{"frames":%s},"profiles":['
        % (dumps(SCHEMA).encode(), dumps(frames, separators=(",", ":")).encode())
    )
    del frames
    unit = b"bytes" if profile.mode == "memory" else b"nanoseconds"  # speedscope knows both
    for index, (thread, spans) in enumerate(zip(profile.threads, by_thread, strict=True)):
        if index:
            out.write(b",")
        events = _span_events(spans) if spans else tree_events(thread.root)
        _write_evented(out, thread_label(profile, thread), events, unit)
    tail = {"name": _title(profile), "activeProfileIndex": 0, "exporter": f"profkit {__version__}"}
    out.write(b"]," + dumps(tail, separators=(",", ":")).encode()[1:])


def write(profile: CallProfile) -> bytes:
    """The profile as a speedscope file (UTF-8 JSON)."""
    out = io.BytesIO()
    write_to(profile, out)
    return out.getvalue()


def _write_evented(
    out: BinaryIO,
    name: str,
    events: Iterator[tuple[str, int, int]],
    unit: bytes = b"nanoseconds",
) -> None:
    """One evented profile; ``startValue`` is 0 and ``endValue`` comes last (JSON objects
    are unordered), so the events need not be held in memory."""
    out.write(
        b'{"type":"evented","name":%s,"unit":"%s","startValue":0,"events":['
        % (json.dumps(name).encode(), unit)
    )
    parts: list[bytes] = []
    size = 0
    end = 0
    first = True
    for kind, at, frame in events:
        part = b'%s{"type":"%s","at":%d,"frame":%d}' % (
            b"" if first else b",",
            kind.encode(),
            at,
            frame,
        )
        first = False
        end = at
        parts.append(part)
        size += len(part)
        if size >= _FLUSH_BYTES:
            out.write(b"".join(parts))
            parts.clear()
            size = 0
    parts.append(b'],"endValue":%d}' % end)
    out.write(b"".join(parts))


def _title(profile: CallProfile) -> str:
    command = command_line(profile)
    return "profkit profile" if command is None else f"profkit: {command}"


def _span_events(spans: list[Span]) -> Iterator[tuple[str, int, int]]:
    events = nested_events(spans)
    start = events[0][1] if events else 0
    shift = min(start, 0)  # spans are relative to the profile start: never negative
    for kind, at, frame in events:
        yield kind, at - shift, frame


def tree_events(root: CallNode) -> Iterator[tuple[str, int, int]]:
    """Balanced ``(type, at, frame)`` events laying the tree out as a timeline: each
    node opens where its previous sibling closed (its parent's start for the first) and
    lasts its inclusive time, clipped to its parent's end. Linear, no recursion."""
    # stack items: (node, start, end) to open, or (None, at, frame) to close
    stack = _layout(root, 0, _total(root))
    pop, push, extend = stack.pop, stack.append, stack.extend
    while stack:
        node, start, end = pop()
        if node is None:
            yield "C", start, end
            continue
        yield "O", start, node.frame
        push((None, end, node.frame))
        if node.children:
            extend(_layout(node, start, end))


def _total(root: CallNode) -> int:
    return root.inclusive_ns or sum(c.inclusive_ns for c in root.children.values())


def _layout(node: CallNode, start: int, end: int) -> list[tuple[CallNode | None, int, int]]:
    """The children of ``node`` placed one after another inside ``[start, end]``, in
    stack order (the first child last)."""
    placed: list[tuple[CallNode | None, int, int]] = []
    at = start
    for child in node.children.values():
        length = min(max(child.inclusive_ns, 0), end - at)
        placed.append((child, at, at + length))
        at += length
    placed.reverse()
    return placed


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
