"""Firefox Profiler JSON (profiler.firefox.com), in its *processed* profile format.

The Firefox Profiler reads two formats: the Gecko profiler's own and its processed format
(the one it saves itself; ``src/types/profile.js`` of firefox-devtools/profiler). This
writes the processed one at ``preprocessedProfileVersion`` :data:`PROCESSED_VERSION`, as
its ``docs-developer/CHANGELOG-formats.md`` describes it: one string table for every
thread in ``shared.stringArray`` (since 56), marker schemas without ``searchable`` (57),
``funcTable.fileName`` still a string index (58 moved files to ``shared.sources``). 57
is also what CPython 3.15's sampling profiler writes; the profiler's upgraders bring a
file up to its current version on load.

One thread per profiled thread, each with its tables (``stackTable``, ``frameTable``,
``funcTable``, ``resourceTable``, ``nativeSymbols``, ``markers``, ``samples``), every index
into them in range (the tests check this). Samples are *weighted*:

* a profile with a timeline (trace mode's spans) gives one sample each time the stack
  changes, at its real time (``weightType`` ``"tracing-ms"``), weighing the time until
  the next change scaled so that each stack's weights add up to its self time in the tree
  (:meth:`_Tables.settle`): the stack chart is the timeline, the call tree the tree's totals;
* a tree alone gives one sample per node with self time, laid one after another from 0
  (a synthetic timeline, as speedscope's export), weighing that self time in ms;
* a memory profile's bytes are carried as bytes (``weightType`` ``"bytes"``): the
  sample's weight is the node's own bytes, its time only the sample's ordinal (ms).

Frames are categorised ``Python`` (a ``.py`` file), ``.NET`` (a .NET profile) or ``C``
(no Python file: builtins and C calls), so the views colour them apart. Where the profile
recorded events with their times (a .NET trace's ``clr_events``: GCs, exceptions, catches,
threads, loads) and has a timeline, they are markers (:mod:`profkit.export.gecko_markers`).

Checked by loading in the real profiler (docs/reports.md, "Firefox Profiler";
``scripts/check_firefox_profiler.py``): the profiler's upgraders take 57 to its own version.
"""

from __future__ import annotations

import json
from typing import Any

from profkit import __version__
from profkit.calltree.model import CallNode, CallProfile, Span, ThreadTree
from profkit.export import gecko_markers as markers
from profkit.export._meta import command_line, thread_label

#: The processed format's version written (``meta.preprocessedProfileVersion``).
PROCESSED_VERSION = 57
#: The Gecko format's version the processed one was made from (``meta.version``).
GECKO_VERSION = 32

CATEGORIES = [
    {"name": "Other", "color": "grey", "subcategories": ["Other"]},
    {"name": "Python", "color": "yellow", "subcategories": ["Other"]},
    {"name": "C", "color": "blue", "subcategories": ["Other"]},
    {"name": ".NET", "color": "purple", "subcategories": ["Other"]},
    {"name": "GC", "color": "orange", "subcategories": ["Other"]},
]
_PYTHON, _C, _DOTNET = 1, 2, 3


def write(profile: CallProfile) -> bytes:
    """The profile as Firefox Profiler JSON (processed format, UTF-8)."""
    strings = _Strings()
    dotnet = profile.metadata.get("runtime") == "CoreCLR"  # what every .NET reader records
    threads = []
    by_thread: list[list[Span]] = [[] for _ in profile.threads]
    for span in profile.spans:
        if 0 <= span.thread < len(by_thread):
            by_thread[span.thread].append(span)
    for index, (thread, spans) in enumerate(zip(profile.threads, by_thread, strict=True)):
        tables = _Tables(profile, strings, dotnet)
        if spans and profile.mode != "memory":
            times, stacks, raw = tables.timeline(spans)
            weights = tables.settle(thread, stacks, raw)
        else:
            times, stacks, weights = tables.tree(thread)
        record = _thread(profile, thread, index, tables, times, stacks, weights)
        if spans and profile.mode != "memory":  # real times: events can be placed on them
            record["markers"] = markers.table(profile, thread, index, strings)
            record["showMarkersInTimeline"] = True
        threads.append(record)
    document = {"meta": _meta(profile), "libs": [], "pages": [], "threads": threads}
    document["shared"] = {"stringArray": strings.array}
    return json.dumps(document, separators=(",", ":")).encode()


class _Strings:
    """The shared string table: text -> index, first come first numbered."""

    def __init__(self) -> None:
        self.array: list[str] = []
        self._index: dict[str, int] = {}

    def __call__(self, text: str) -> int:
        found = self._index.get(text)
        if found is None:
            found = self._index[text] = len(self.array)
            self.array.append(text)
        return found


class _Tables:
    """One thread's stack, frame, function and resource tables, filled as stacks are met."""

    def __init__(self, profile: CallProfile, strings: _Strings, dotnet: bool) -> None:
        self.profile, self.strings, self.dotnet = profile, strings, dotnet
        # no category/subcategory columns: v53 derives a stack's from its frame's
        self.stack: dict[str, list[Any]] = {k: [] for k in ("frame", "prefix")}
        self.frame: dict[str, list[Any]] = {k: [] for k in _FRAME_COLUMNS}
        self.func: dict[str, list[Any]] = {k: [] for k in _FUNC_COLUMNS}
        self.resource: dict[str, list[Any]] = {k: [] for k in ("lib", "name", "host", "type")}
        self._stacks: dict[tuple[int | None, int], int] = {}
        self._frames: dict[int, int] = {}
        self._resources: dict[str, int] = {}

    def stack_of(self, prefix: int | None, frame: int) -> int:
        """The stack index of ``frame`` (a profile frame) called under ``prefix``."""
        key = (prefix, frame)
        found = self._stacks.get(key)
        if found is None:
            row = self._frame(frame)
            found = self._stacks[key] = len(self.stack["frame"])
            self.stack["frame"].append(row)
            self.stack["prefix"].append(prefix)
        return found

    def _frame(self, frame: int) -> int:
        found = self._frames.get(frame)
        if found is not None:
            return found
        f = self.profile.frames[frame]
        python = f.file.endswith((".py", ".pyw"))
        category = _DOTNET if self.dotnet else _PYTHON if python else _C
        func = len(self.func["name"])
        columns = {
            "name": self.strings(f.name),
            "isJS": python,
            "relevantForJS": False,
            "resource": self._resource(f.file) if f.file else -1,
            "fileName": self.strings(f.file) if f.file else None,
            "lineNumber": f.line or None,
            "columnNumber": None,
        }
        for key, value in columns.items():
            self.func[key].append(value)
        found = self._frames[frame] = len(self.frame["func"])
        row: dict[str, int | None] = dict.fromkeys(_FRAME_COLUMNS)
        row.update(address=-1, inlineDepth=0, category=category, subcategory=0, func=func)
        row["line"] = f.line or None
        for key, value in row.items():
            self.frame[key].append(value)
        return found

    def _resource(self, file: str) -> int:
        found = self._resources.get(file)
        if found is None:
            found = self._resources[file] = len(self.resource["name"])
            self.resource["lib"].append(None)
            self.resource["name"].append(self.strings(file))
            self.resource["host"].append(None)
            self.resource["type"].append(0)  # resourceTypes.unknown
        return found

    def timeline(self, spans: list[Span]) -> tuple[list[float], list[int], list[float]]:
        """One sample per stack change of the spans, weighing the time to the next."""
        events: list[tuple[int, int | None]] = []  # (ns, stack after it)
        open_: list[tuple[int, int]] = []  # (end ns, stack)
        for span in sorted(spans, key=lambda s: (s.start_ns, s.depth)):
            while open_ and open_[-1][0] <= span.start_ns:
                end, _ = open_.pop()
                events.append((end, open_[-1][1] if open_ else None))
            stack = self.stack_of(open_[-1][1] if open_ else None, span.frame)
            end = max(span.end_ns, span.start_ns)  # untidy spans are clipped to their parent
            open_.append((min(end, open_[-1][0]) if open_ else end, stack))
            events.append((span.start_ns, stack))
        while open_:
            end, _ = open_.pop()
            events.append((end, open_[-1][1] if open_ else None))
        times: list[float] = []
        stacks: list[int] = []
        weights: list[float] = []
        for (ns, at), (after, _) in zip(events, [*events[1:], events[-1]], strict=True):
            if at is not None and after > ns:
                times.append(ns / 1e6)
                stacks.append(at)
                weights.append((after - ns) / 1e6)
        return times, stacks, weights

    def settle(self, thread: ThreadTree, stacks: list[int], raw: list[float]) -> list[float]:
        """The timeline's weights scaled, stack by stack, to the tree's self times.

        Spans are clock readings; the tree's times have the profiler's own measured cost
        per call taken out (``--compensate``, on by default): over 177k calls the spans
        came to 4% more than the tree (888 ms against 853 ms in the real profiler). Its
        call tree sums weights and its stack chart draws sample times, so times stay the
        clock's and weights become the tree's: both views right, totals equal to
        ``profkit report``'s. A stack the tree does not have keeps its clock weight.
        """
        clock: dict[int, float] = {}
        for stack, weight in zip(stacks, raw, strict=True):
            clock[stack] = clock.get(stack, 0.0) + weight
        own: dict[int, float] = {}
        todo: list[tuple[CallNode, int | None]] = [(c, None) for c in thread.root.children.values()]
        while todo:
            node, prefix = todo.pop()
            found = self._stacks.get((prefix, node.frame))
            if found is not None:
                own[found] = node.exclusive_ns / 1e6
                todo.extend((c, found) for c in node.children.values())
        return [
            w * own[s] / clock[s] if s in own and clock[s] > 0 else w
            for s, w in zip(stacks, raw, strict=True)
        ]

    def tree(self, thread: ThreadTree) -> tuple[list[float], list[int], list[float]]:
        """One sample per node with self weight, one after another (module doc)."""
        memory = self.profile.mode == "memory"
        times: list[float] = []
        stacks: list[int] = []
        weights: list[float] = []
        clock = 0.0
        todo: list[tuple[CallNode, int | None]] = [
            (c, None) for c in reversed(list(thread.root.children.values()))
        ]
        while todo:
            node, prefix = todo.pop()
            stack = self.stack_of(prefix, node.frame)
            if node.exclusive_ns > 0:
                weight = float(node.exclusive_ns) if memory else node.exclusive_ns / 1e6
                times.append(float(len(times)) if memory else clock)
                stacks.append(stack)
                weights.append(weight)
                clock += 0.0 if memory else weight
            todo.extend((c, stack) for c in reversed(list(node.children.values())))
        return times, stacks, weights


_FRAME_COLUMNS = (
    "address",
    "inlineDepth",
    "category",
    "subcategory",
    "func",
    "nativeSymbol",
    "innerWindowID",
    "line",
    "column",
)
_FUNC_COLUMNS = (
    "name",
    "isJS",
    "relevantForJS",
    "resource",
    "fileName",
    "lineNumber",
    "columnNumber",
)


def _table(columns: dict[str, list[Any]]) -> dict[str, Any]:
    return {**columns, "length": len(next(iter(columns.values())))}


def _thread(
    profile: CallProfile,
    thread: ThreadTree,
    index: int,
    tables: _Tables,
    times: list[float],
    stacks: list[int],
    weights: list[float],
) -> dict[str, Any]:
    pid = thread.pid if thread.pid is not None else profile.metadata.get("pid", 0)
    end = max((t + w for t, w in zip(times, weights, strict=True)), default=0.0)
    return {
        "name": thread_label(profile, thread),
        "isMainThread": index == 0,
        "processType": "default",
        "processName": command_line(profile) or "profkit",
        "processStartupTime": 0,
        "processShutdownTime": end,
        "registerTime": 0,
        "unregisterTime": None,
        "pausedRanges": [],
        "pid": str(pid),
        "tid": thread.native_id if thread.native_id is not None else thread.thread_id,
        "samples": {
            "stack": stacks,
            "time": times,
            "weight": weights,
            "weightType": "bytes" if profile.mode == "memory" else "tracing-ms",
            "length": len(stacks),
        },
        "stackTable": _table(tables.stack),
        "frameTable": _table(tables.frame),
        "funcTable": _table(tables.func),
        "resourceTable": _table(tables.resource),
        "nativeSymbols": _table({k: [] for k in ("libIndex", "address", "name", "functionSize")}),
        "markers": _table(
            {k: [] for k in ("data", "name", "startTime", "endTime", "phase", "category")}
        ),
    }


def _meta(profile: CallProfile) -> dict[str, Any]:
    return {
        "interval": 1.0,
        "startTime": 0,
        "processType": 0,
        "product": command_line(profile) or "profkit",
        "stackwalk": 0,
        "version": GECKO_VERSION,
        "preprocessedProfileVersion": PROCESSED_VERSION,
        "categories": CATEGORIES,
        "markerSchema": markers.SCHEMAS,
        "symbolicated": True,
        "importedFrom": f"profkit {__version__} ({profile.mode} mode)",
        "extensions": {"id": [], "name": [], "baseURL": [], "length": 0},
    }
