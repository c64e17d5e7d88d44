"""Chrome trace event JSON (Perfetto UI, chrome://tracing, viztracer's vizviewer).

Uses the JSON object form ``{"traceEvents": [...]}`` with complete (``"ph": "X"``)
events, timestamps in microseconds as the format requires, and ``process_name`` /
``thread_name`` metadata events. From the timeline of spans when the profile has one;
otherwise the tree is laid out as a synthetic timeline (children one after another from
their parent's start, clipped to it), and each event says so in ``args.synthetic``: the
widths are real totals, the order is not.

Processes and threads: each thread goes under its own process (``ThreadTree.pid``, set
when several files are combined, else the profile's ``metadata["pid"]``, else 1), with
its OS thread id (``native_id``) when the profile recorded one; otherwise Python's thread
id when it fits the 32 bits viewers use, else a small number unique in its process.

Each event's ``args`` carry the function's ``file`` and ``line`` (where it starts) when
the frame has a file.

Times are integer nanoseconds until written, then printed as exact decimals
(``1234.567`` µs): children never end after their parent, so no two events overlap
partially (float division did). Events are streamed, memory bounded by the depth.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any, BinaryIO

from profkit.calltree.model import CallNode, CallProfile, Frame, Span
from profkit.export._meta import command_line
from profkit.export.speedscope import nested_events

_FLUSH_BYTES = 1 << 20
_INT32_MAX = (1 << 31) - 1


def _us(ns: int) -> bytes:
    """Nanoseconds as an exact decimal number of microseconds."""
    if ns < 0:
        return b"-" + _us(-ns)
    whole, frac = divmod(ns, 1000)
    return b"%d.%03d" % (whole, frac) if frac else b"%d" % whole


def process_ids(profile: CallProfile) -> list[int]:
    """The process id of each thread (see the module docstring)."""
    meta = profile.metadata.get("pid")
    default = meta if type(meta) is int else 1
    return [t.pid if t.pid is not None else default for t in profile.threads]


def thread_ids(profile: CallProfile, pids: list[int]) -> list[int]:
    """The thread id of each thread, unique within its process."""
    used: dict[int, set[int]] = {}
    out: list[int] = []
    for thread, pid in zip(profile.threads, pids, strict=True):
        taken = used.setdefault(pid, set())
        tid = thread.native_id
        if tid is None and 0 < thread.thread_id <= _INT32_MAX:
            tid = thread.thread_id
        if tid is None or tid in taken:
            tid = 1
            while tid in taken:
                tid += 1
        taken.add(tid)
        out.append(tid)
    return out


def write_to(profile: CallProfile, out: BinaryIO) -> None:
    """Stream the profile as Chrome trace event JSON (UTF-8) to ``out``."""
    names = [json.dumps(f.name).encode() for f in profile.frames]
    where = [_where(f) for f in profile.frames]
    pids = process_ids(profile)
    tids = thread_ids(profile, pids)
    writer = _Events(out)
    out.write(b'{"traceEvents":[')
    for pid, title in _process_titles(profile, pids).items():
        writer.meta("process_name", pid, 0, title)
    by_thread: list[list[Span]] = [[] for _ in profile.threads]
    for span in profile.spans:
        by_thread[span.thread].append(span)
    for thread, pid, tid, spans in zip(profile.threads, pids, tids, by_thread, strict=True):
        writer.meta("thread_name", pid, tid, thread.name)
        head = b'{"ph":"X","cat":"call","pid":%d,"tid":%d,' % (pid, tid)
        if spans:
            for frame, start, end in _from_spans(spans):
                writer.add(
                    head
                    + b'"name":%s,"ts":%s,"dur":%s,"args":{%s}}'
                    % (names[frame], _us(start), _us(end - start), where[frame][1:])
                )
        else:
            for node, start, end in _synthesised(thread.root):
                writer.add(
                    head + b'"name":%s,"ts":%s,"dur":%s,"args":{"calls":%d,"self_ns":%d,'
                    b'"synthetic":true%s}}'
                    % (
                        names[node.frame],
                        _us(start),
                        _us(end - start),
                        node.calls,
                        node.exclusive_ns,
                        where[node.frame],
                    )
                )
    writer.flush()
    other: dict[str, str] = {"profkit_mode": profile.mode}
    if profile.mode == "memory":  # the format has no unit but time (registry.bytes_note)
        other["unit"] = "bytes: 1 ns of duration is 1 byte allocated"
    tail = {"displayTimeUnit": "ns", "otherData": other}
    out.write(b"]," + json.dumps(tail, separators=(",", ":")).encode()[1:])


def _where(frame: Frame) -> bytes:
    """``,"file":...,"line":N`` for an event's args (Perfetto lists them on the selected
    slice); empty for a frame without a file (a C function). The name stays the bare
    function name: viewers group slices by name, and a line in it would split them."""
    if not frame.file:
        return b""
    return b',"file":%s,"line":%d' % (json.dumps(frame.file).encode(), frame.line)


def write(profile: CallProfile) -> bytes:
    """The profile as Chrome trace event JSON (UTF-8)."""
    out = io.BytesIO()
    write_to(profile, out)
    return out.getvalue()


class _Events:
    """Comma-separated JSON objects, written in ~1 MB pieces."""

    def __init__(self, out: BinaryIO) -> None:
        self.out = out
        self.parts: list[bytes] = []
        self.size = 0
        self.first = True

    def add(self, event: bytes) -> None:
        if not self.first:
            self.parts.append(b",")
        self.first = False
        self.parts.append(event)
        self.size += len(event) + 1
        if self.size >= _FLUSH_BYTES:
            self.flush()

    def meta(self, kind: str, pid: int, tid: int, name: str) -> None:
        doc: dict[str, Any] = {
            "ph": "M",
            "name": kind,
            "pid": pid,
            "tid": tid,
            "args": {"name": name},
        }
        self.add(json.dumps(doc, separators=(",", ":")).encode())

    def flush(self) -> None:
        if self.parts:
            self.out.write(b"".join(self.parts))
            self.parts.clear()
            self.size = 0


def _process_titles(profile: CallProfile, pids: list[int]) -> dict[int, str]:
    """``{pid: title}``: each process's command line when the metadata says it."""
    titles: dict[int, str] = {}
    command = command_line(profile)
    processes = profile.metadata.get("processes")
    by_pid: dict[int, str] = {}
    if isinstance(processes, list):
        for meta in processes:
            if isinstance(meta, dict) and type(meta.get("pid")) is int:
                argv = meta.get("argv")
                if isinstance(argv, list) and argv:
                    by_pid[meta["pid"]] = " ".join(str(a) for a in argv)
    for pid in pids:
        if pid not in titles:
            title = by_pid.get(pid) or command or "profkit"
            titles[pid] = title if pid not in by_pid else f"{title} (pid {pid})"
    return titles


def _from_spans(spans: list[Span]) -> Iterator[tuple[int, int, int]]:
    """``(frame, start, end)`` of balanced spans, sorted by start (outer first)."""
    opened: list[tuple[int, int]] = []
    done: list[tuple[int, int, int, int]] = []  # (start, order, frame, end)
    for kind, at, frame in nested_events(spans):
        if kind == "O":
            opened.append((frame, at))
            continue
        frame, start = opened.pop()
        done.append((start, -len(done), frame, at))
    # an enclosing span closes after its children: at the same start it sorts first
    done.sort(key=lambda e: (e[0], -(e[3] - e[0]), e[1]))
    for start, _, frame, end in done:
        yield frame, start, end


def _synthesised(root: CallNode) -> Iterator[tuple[CallNode, int, int]]:
    """Pre-order ``(node, start, end)``: children one after another inside their parent."""
    total = root.inclusive_ns or sum(c.inclusive_ns for c in root.children.values())
    stack: list[tuple[CallNode, int, int]] = []
    _place(root, 0, total, stack)
    pop = stack.pop
    while stack:
        node, start, end = pop()
        yield node, start, end
        if node.children:
            _place(node, start, end, stack)


def _place(node: CallNode, start: int, end: int, stack: list[tuple[CallNode, int, int]]) -> None:
    placed = []
    at = start
    for child in node.children.values():
        length = min(max(child.inclusive_ns, 0), end - at)
        placed.append((child, at, at + length))
        at += length
    placed.reverse()
    stack.extend(placed)
