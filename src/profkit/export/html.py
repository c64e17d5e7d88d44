"""A self-contained HTML flame graph: one file, inline CSS and JS, no network at view time.

The profile is embedded as JSON in a ``<script type="application/json">`` element with
every ``<`` escaped as ``\\u003c``, so no frame name can close the element (viztracer
escapes ``</script>`` the same way). Trees are embedded flat (parent index per node, as
in the profile file) and rebuilt in the browser without recursion. The view is an icicle
(callers above callees; a button flips it to a flame graph, callers at the bottom) built
from positioned ``<div>`` elements, so frame names are in
the DOM (searchable with the browser's own find, checkable by a headless browser):
click a frame to zoom into it, click an ancestor or press Escape to zoom out, hover for
name, time and share, type in the search box to highlight matching frames.
"""

from __future__ import annotations

import html
import json
from importlib import resources
from typing import Any

from profkit import __version__
from profkit.calltree.model import CallNode, CallProfile
from profkit.export._meta import command_line
from profkit.report.tree import total_ns


def data(profile: CallProfile) -> dict[str, Any]:
    """The JSON the page embeds: frame labels and flat per-thread trees."""
    threads = []
    for t in profile.threads:
        rows: list[list[int]] = []
        stack: list[tuple[int, CallNode]] = [(-1, t.root)]
        while stack:
            parent, node = stack.pop()
            index = len(rows)
            incl = total_ns(node) if node.frame < 0 else node.inclusive_ns
            rows.append([parent, node.frame, incl, node.exclusive_ns, node.calls])
            stack.extend((index, c) for c in reversed(node.children.values()))
        threads.append({"name": t.name, "id": t.thread_id, "label": t.label, "nodes": rows})
    return {
        "title": _title(profile),
        "mode": profile.mode,
        "names": [f.name for f in profile.frames],
        "where": [f"{f.file}:{f.line}" if f.file else "" for f in profile.frames],
        "threads": threads,
    }


def _title(profile: CallProfile) -> str:
    command = command_line(profile)
    return "profkit flame graph" if command is None else f"profkit: {command}"


def embed_json(value: Any) -> str:
    """JSON safe inside a ``<script>`` element: ``<`` can never start ``</script>``."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return text.replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def write(profile: CallProfile) -> bytes:
    """The profile as one HTML page (UTF-8)."""
    template = resources.files("profkit.export").joinpath("flamegraph.html").read_text("utf-8")
    page = (
        template.replace("{{TITLE}}", html.escape(_title(profile)))
        .replace("{{VERSION}}", html.escape(__version__))
        .replace("{{DATA}}", embed_json(data(profile)))
    )
    # backslashreplace: a lone surrogate (a non-UTF-8 file name) becomes a \\udcXX escape,
    # which inside the JSON string literals is itself valid JSON for that code point
    return page.encode("utf-8", "backslashreplace")
