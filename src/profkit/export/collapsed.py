"""Collapsed stacks (``a;b;c 123``) for flamegraph.pl, inferno and speedscope.

One line per call path with its *self* time in nanoseconds, root first. With several
threads the thread name is the first element, so per-thread flames stay apart.
"""

from __future__ import annotations

from profkit.calltree.model import CallProfile
from profkit.report.tree import walk


def _clean(name: str) -> str:
    # ';' separates frames and the last space separates the count: neither may appear in a name
    return name.replace(";", ":").replace("\n", " ").replace("\r", " ") or "?"


def write(profile: CallProfile) -> bytes:
    """The profile as collapsed stacks (UTF-8 text)."""
    names = [_clean(f.name).replace(" ", "_") for f in profile.frames]
    lines: list[str] = []
    many = len(profile.threads) > 1
    for thread in profile.threads:
        head = [_clean(f"thread {thread.name}").replace(" ", "_")] if many else []
        for _depth, node, path in walk(thread.root):
            if node.frame < 0 or node.exclusive_ns <= 0:
                continue
            stack = [*head, *(names[f] for f in path), names[node.frame]]
            lines.append(f"{';'.join(stack)} {node.exclusive_ns}")
    return ("\n".join(lines) + "\n" if lines else "").encode("utf-8", "backslashreplace")
