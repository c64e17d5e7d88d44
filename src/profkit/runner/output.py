"""The end of a run on the terminal: the call tree on stderr, at an ordinary recursion limit.

Where the profile goes (file names, format, children's files, saving, the "saved to" and
"view it" lines) is decided in one place, :mod:`profkit.export.destination`; the names
below are re-exported from there for the runner's older callers.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

from profkit._record import replace
from profkit.calltree.model import CallProfile
from profkit.export.destination import (
    PID,
    Destination,
    child_template,
    output_path,
    program_label,
    resolve_output,
    stderr,
)

TYPE_CHECKING = False  # typing's, without importing typing at run time (profkit run's start-up)
if TYPE_CHECKING:
    from typing import TextIO

__all__ = [
    "MAX_THREADS_SHOWN",
    "PID",
    "Destination",
    "child_template",
    "ordinary_recursion_limit",
    "output_path",
    "program_label",
    "render",
    "resolve_output",
    "stderr",
]


#: Most threads whose trees are printed at the end (the hottest); ``profkit report`` shows all.
MAX_THREADS_SHOWN = 8


def render(profile: CallProfile, stream: TextIO) -> str:
    """The call tree as ``profkit report`` prints it, fitted to the terminal of ``stream``.

    A program with hundreds of threads would print hundreds of trees: only the
    :data:`MAX_THREADS_SHOWN` busiest are printed (in their order), then one line for
    the rest.
    """
    from profkit.report.text import render_tree

    more = ""
    if len(profile.threads) > MAX_THREADS_SHOWN:
        by_time = sorted(profile.threads, key=lambda t: t.root.inclusive_ns, reverse=True)
        kept = {id(t) for t in by_time[:MAX_THREADS_SHOWN]}
        rest = len(profile.threads) - MAX_THREADS_SHOWN
        more = f"\n… {rest} more threads (profkit report FILE shows every thread)\n"
        profile = replace(profile, threads=[t for t in profile.threads if id(t) in kept])

    tty = _isatty(stream)
    width: int | None = None  # a file or a pipe: full names, nothing cut (issue #11)
    if tty:
        width = 80
        with contextlib.suppress(OSError, ValueError):
            width = max(os.get_terminal_size(stream.fileno()).columns, 60)
    color = tty and not os.environ.get("NO_COLOR")
    # no depth cap: chains and import machinery are folded instead, so the hot path fits
    tree = render_tree(
        profile, width=width, color=color, min_share=0.02, top=8, fold=True, hot_spots=3
    )
    from profkit.report._fmt import not_seen_note, peak_note

    notes = [n for n in (peak_note(profile), not_seen_note(profile)) if n]
    return tree + more + "".join(f"profkit: {n}\n" for n in notes)


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


#: The depth profkit's own end-of-run work (building, saving, printing a tree) may need.
_ORDINARY_RECURSION_LIMIT = 1000


@contextlib.contextmanager
def ordinary_recursion_limit() -> Iterator[None]:
    """Run profkit's own end-of-run work at an ordinary recursion limit.

    A program may set ``sys.setrecursionlimit(30)`` and leave it so: the profile must
    still be saved (it used to be lost to a ``RecursionError``). The program's limit is
    put back afterwards (its ``atexit`` handlers may count on it).
    """
    limit = sys.getrecursionlimit()
    if limit < _ORDINARY_RECURSION_LIMIT:
        sys.setrecursionlimit(_ORDINARY_RECURSION_LIMIT)
    try:
        yield
    finally:
        if limit < _ORDINARY_RECURSION_LIMIT:
            with contextlib.suppress(RecursionError, ValueError):
                sys.setrecursionlimit(limit)
