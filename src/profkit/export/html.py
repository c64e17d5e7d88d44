"""A self-contained HTML view of a profile: one file, inline CSS and JS, no network at view time.

The page opens on the call tree as the text report reads it (:mod:`.html_data`): the
program's own functions first, each row with its time, self time and ``file:line``; runs of
library and import-machinery frames folded into one "N frames hidden (sympy, <import>)"
row under the library call that starts them, which opens on a click; the program's own
functions called from inside such a run are lifted to stand right under it, so they are
seen without opening anything. Hot spots (self time over all paths) are listed above.
A flame graph view (icicle, or flame with callers at the bottom) draws the same folded
tree, and a timeline view draws the spans of a profile recorded with ``--timeline``.
A search box highlights matching frames and opens the folds and branches that hide them.

The profile is embedded as JSON in a ``<script type="application/json">`` element with
every ``<`` escaped as ``\\u003c``, so no frame name can close the element (viztracer
escapes ``</script>`` the same way). Trees are embedded flat (parent row per node) and
rebuilt in the browser without recursion. Frame names are put in the DOM as text, never as
markup, so the browser's own find works and a headless browser can check them.
"""

from __future__ import annotations

import html
import json
from importlib import resources
from typing import Any

from profkit import __version__
from profkit.calltree.model import CallProfile
from profkit.export._meta import command_line
from profkit.export.html_data import page_data


def data(profile: CallProfile) -> dict[str, Any]:
    """The JSON the page embeds (:func:`profkit.export.html_data.page_data`) and its title."""
    return {"title": _title(profile), **page_data(profile)}


def _title(profile: CallProfile) -> str:
    command = command_line(profile)
    return "profkit profile" if command is None else f"profkit: {command}"


def embed_json(value: Any) -> str:
    """JSON safe inside a ``<script>`` element: ``<`` can never start ``</script>``."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return text.replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def write(profile: CallProfile) -> bytes:
    """The profile as one HTML page (UTF-8)."""
    folder = resources.files("profkit.export")
    template = folder.joinpath("flamegraph.html").read_text("utf-8")
    page = (
        template.replace("{{TITLE}}", html.escape(_title(profile)))
        .replace("{{VERSION}}", html.escape(__version__))
        .replace("{{SCRIPT}}", folder.joinpath("htmlview.js").read_text("utf-8"))
        .replace("{{DATA}}", embed_json(data(profile)))
    )
    # backslashreplace: a lone surrogate (a non-UTF-8 file name) becomes a \\udcXX escape,
    # which inside the JSON string literals is itself valid JSON for that code point
    return page.encode("utf-8", "backslashreplace")
