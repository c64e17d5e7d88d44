"""What the HTML page embeds: the tree as the text report shows it, within a size budget.

The page reads like the text report's folded tree (:mod:`profkit.report`): profkit's own
frames are hidden by the same rules (:func:`~profkit.report.rules.hiding_rules`), the
program's own frames are the ones :func:`~profkit.report.rules.own_frames` names, and the hot
spots are the report's (:class:`~profkit.report.rules.ThreadRules`). Library and import
frames are not dropped here but flagged, so the browser can fold them into expandable
groups ("N frames hidden (sympy, <built-in>)") and open one on a click.

Why a budget: a 40 MB profile has millions of nodes, and a page embedding all of them is a
few hundred MB of JSON that no browser opens. The page keeps the :data:`MAX_NODES` nodes
with the most inclusive time (a best-first walk of the shown tree, so nothing smaller is
ever made) and says on the page what it left out; timelines likewise keep the
:data:`MAX_SPANS` longest spans.
"""

from __future__ import annotations

import heapq
import os
from typing import Any

from profkit.calltree.model import CallProfile, Frame
from profkit.report.rules import ThreadRules, c_functions, hiding_rules, is_import, own_frames
from profkit.report.shown import Hiding, ShownNode, shown_tree
from profkit.report.shown import total_ns as shown_total

#: Call-tree nodes embedded at most, over every thread (about 30 bytes of JSON each).
MAX_NODES = 150_000
#: Timeline spans embedded at most (the longest; a short one is under a pixel anyway).
MAX_SPANS = 60_000
#: Hot spots listed per thread.
HOT_SPOTS = 8
#: .NET frames the page folds as library code when the profile names no own frames.
_FRAMEWORK = ("System.", "Microsoft.", "Internal.")
_INSTALLED = ("site-packages", "dist-packages")


class _Frames:
    """The frames the page refers to, renumbered densely in order of first use."""

    def __init__(self, profile: CallProfile) -> None:
        self.frames = profile.frames
        self.index: dict[int, int] = {}

    def of(self, frame: int) -> int:
        """The page's number of profile frame ``frame`` (-1 stays -1: a thread's root)."""
        if frame < 0 or frame >= len(self.frames):
            return -1
        got = self.index.get(frame)
        if got is None:
            got = self.index[frame] = len(self.index)
        return got


def page_data(profile: CallProfile, max_nodes: int | None = None) -> dict[str, Any]:
    """The JSON the page embeds: per-thread trees (flat rows: parent row, frame, total,
    self, calls), hot spots, spans, and a table of the frames they name; at most
    ``max_nodes`` nodes (:data:`MAX_NODES`)."""
    max_nodes = MAX_NODES if max_nodes is None else max_nodes
    hiding = hiding_rules(profile, (), False)
    table = _Frames(profile)
    threads, left = _trees(profile, hiding, table, max_nodes)
    rules = ThreadRules(profile, (), True, True)
    for out, thread in zip(threads, profile.threads, strict=True):
        spots = rules.of(thread.root)[0]
        best = heapq.nlargest(HOT_SPOTS, spots.items(), key=lambda item: item[1])
        out["hot"] = [[table.of(f), ns] for f, ns in best if ns > 0 and f >= 0]
    spans, spans_left = _spans(profile, hiding, table)
    return {
        "mode": profile.mode,
        "metric": str(profile.metadata.get("metric", "")),
        "threads": threads,
        "spans": spans,
        "left": {"nodes": left[0], "ns": left[1], "largest": left[2], "spans": spans_left},
        **_frame_table(profile, table),
    }


def _trees(
    profile: CallProfile, hiding: Hiding, table: _Frames, max_nodes: int
) -> tuple[list[dict[str, Any]], tuple[int, int, int]]:
    """Every thread's shown tree, largest nodes first until ``max_nodes``; and what was
    left out: (subtrees, their summed time, the largest one's time)."""
    threads: list[dict[str, Any]] = []
    heap: list[tuple[int, int, int, int, ShownNode]] = []  # -total, order, thread, parent
    order = 0
    for index, thread in enumerate(profile.threads):
        root = shown_tree(thread.root, hiding)
        rows = [[-1, -1, shown_total(root), root.exclusive_ns, root.calls]]
        threads.append({"label": thread.label, "nodes": rows})
        for child in root.children.values():
            heap.append((-child.inclusive_ns, order, index, 0, child))
            order += 1
    heapq.heapify(heap)
    kept = 0
    while heap and kept < max_nodes:
        _, _, index, parent, node = heapq.heappop(heap)
        rows = threads[index]["nodes"]
        row = len(rows)
        rows.append(
            [parent, table.of(node.frame), node.inclusive_ns, node.exclusive_ns, node.calls]
        )
        kept += 1
        for child in node.children.values():
            heapq.heappush(heap, (-child.inclusive_ns, order, index, row, child))
            order += 1
    left_ns = sum(-item[0] for item in heap)
    return threads, (len(heap), left_ns, -heap[0][0] if heap else 0)


def _spans(profile: CallProfile, hiding: Hiding, table: _Frames) -> tuple[list[list[int]], int]:
    """The timeline's longest spans as ``[thread, frame, start, end, depth]`` (profkit's
    own frames left out and the depths shifted so each thread's outermost shown span is at
    0); and how many were left out."""
    spans = [
        s
        for s in profile.spans
        if s.end_ns > s.start_ns and not hiding.drops(s.frame, False) and s.frame >= 0
    ]
    if not spans or profile.mode == "memory":
        return [], 0
    kept = heapq.nlargest(MAX_SPANS, spans, key=lambda s: s.end_ns - s.start_ns)
    top: dict[int, int] = {}
    for s in kept:
        top[s.thread] = min(top.get(s.thread, s.depth), s.depth)
    kept.sort(key=lambda s: (s.thread, s.start_ns))
    out = [
        [s.thread, table.of(s.frame), s.start_ns, s.end_ns, s.depth - top[s.thread]] for s in kept
    ]
    return out, len(spans) - len(kept)


def _frame_table(profile: CallProfile, table: _Frames) -> dict[str, list[Any]]:
    """Names, short and full ``file:line``, own flags and package labels of the frames the
    page uses, in the page's numbering."""
    frames = profile.frames
    used = sorted(table.index, key=table.index.__getitem__)
    builtin = c_functions(profile)
    own = _own(profile, builtin)
    base = _script_dir(profile, own)
    return {
        "names": [frames[f].name for f in used],
        "where": [_short(frames[f], base) for f in used],
        "files": [frames[f].file for f in used],
        "own": [1 if own[f] else 0 for f in used],
        "pkg": [_package(frames[f], f < len(builtin) and builtin[f]) for f in used],
    }


def _own(profile: CallProfile, builtin: list[bool]) -> list[bool]:
    """The program's own frames: the report's rule (:func:`own_frames`); where it names
    none, the frames of the file the program was started from (``-m json.tool`` runs
    ``json/tool.py``, which is in the standard library, so the report's rule finds no
    ``__main__``); where there is none either (.NET, hand-made profiles), every frame but
    import machinery, C functions and the .NET framework's namespaces."""
    own = own_frames(profile)
    if any(own):
        return own
    frames = profile.frames
    argv = profile.metadata.get("argv")
    main = str(argv[0]) if isinstance(argv, list) and argv else ""
    if os.path.isabs(main):
        started = [f.file == main for f in frames]
        if any(started):
            return started
    return [
        not (is_import(f) or f.name.startswith(_FRAMEWORK) or (i < len(builtin) and builtin[i]))
        for i, f in enumerate(frames)
    ]


def _package(frame: Frame, builtin: bool) -> str:
    """The label a folded group names a frame by: its top-level module."""
    if builtin or (not frame.file and "." not in frame.name):
        return "<built-in>"
    if is_import(frame):
        return "<import>"
    return frame.name.split(".", 1)[0]


def _script_dir(profile: CallProfile, own: list[bool]) -> str:
    """The directory of the program's first own file outside installed code (paths under it
    are shown relative to it)."""
    for f, mine in zip(profile.frames, own, strict=False):
        if mine and os.path.isabs(f.file) and _from_package(f.file) is None:
            return os.path.dirname(f.file) + os.sep
    return ""


def _from_package(path: str) -> str | None:
    """``json/tool.py`` for a file of the standard library or an installed package (the
    path from its top-level package down), ``None`` for any other file."""
    parts = path.split(os.sep)
    for i in range(len(parts) - 1, 0, -1):
        if parts[i - 1] in _INSTALLED or (
            parts[i - 1].startswith("python3") and i > 1 and parts[i - 2] == "lib"
        ):
            return os.sep.join(parts[i:])
    return None


def _short(frame: Frame, base: str) -> str:
    """``file:line`` short enough for a row: relative to the script's directory, or from
    the package down for installed code and the standard library."""
    path = frame.file
    if not path:
        return ""
    path = path[len(base) :] if base and path.startswith(base) else _from_package(path) or path
    return f"{path}:{frame.line}" if frame.line else path
