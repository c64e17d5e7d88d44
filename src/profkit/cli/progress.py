"""One progress line on stderr for the long steps of ``report`` and ``export``.

Why the CLI draws it and the libraries only report: library code never prints, so
:func:`profkit.calltree.file.load` and the exporters take a ``progress(stage, done,
total)`` callable and call it as they go; this is the one drawing it. It stays silent for
the first :data:`DELAY` seconds (a small profile shows nothing, as before), then keeps one
line updated in place (``\\r`` and erase-to-end), and erases it when the command ends, so
what the command prints after it is not mixed with it. Only where someone watches:
stderr a terminal, unless ``--progress`` forces it (then from the first step: tests and
logs) or ``--no-progress`` silences it.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import TextIO

#: Seconds a command runs before its progress line appears (issue #25 item 15: "anything
#: over a couple of seconds").
DELAY = 2.0
#: Least time between two redraws: a loop may report every few thousand rows.
INTERVAL = 0.2


def add_progress_argument(parser: argparse.ArgumentParser) -> None:
    """``--progress`` / ``--no-progress`` (default: on a terminal, after two seconds)."""
    parser.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="a progress line on stderr for long steps (default: when stderr is a terminal, "
        f"for a command running over {DELAY:g} s)",
    )


class ProgressLine:
    """``progress(stage, done, total)`` drawn as ``profkit: STAGE 42% (3 s)``."""

    def __init__(
        self,
        stream: TextIO,
        *,
        delay: float = DELAY,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream = stream
        self.clock = clock
        self.start = clock()
        self.delay = delay
        self.last = float("-inf")
        self.stage = ""
        self.drawn = False

    def __call__(self, stage: str, done: int = 0, total: int = 0) -> None:
        now = self.clock()
        elapsed = now - self.start
        if elapsed < self.delay or (stage == self.stage and now - self.last < INTERVAL):
            self.stage = stage
            return
        self.stage, self.last = stage, now
        share = f" {min(100, 100 * done // total):3d}%" if total > 0 else ""
        self.stream.write(f"\rprofkit: {stage}{share} ({elapsed:.0f} s)\x1b[K")
        self.stream.flush()
        self.drawn = True

    def close(self) -> None:
        """Erase the line (if it was ever drawn)."""
        if self.drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self.drawn = False


def progress_line(flag: bool | None, stream: TextIO | None = None) -> ProgressLine | None:
    """The command's progress line: ``--progress`` draws from the start, ``--no-progress``
    never, and by default one appears after :data:`DELAY` seconds on a terminal."""
    out = sys.stderr if stream is None else stream
    if flag is False or (flag is None and not out.isatty()):
        return None
    return ProgressLine(out, delay=0.0 if flag else DELAY)
