"""The event-line stream: the article's format, with base time applied without orphans.

Format (four spaces per depth; durations in µs with three decimals, or integer ns)::

    Enter: myapp.main
        Enter: myapp.work
        Leave: myapp.work, Duration: 12.250 us
        Resume: myapp.numbers
        Yield: myapp.numbers, Duration: 0.700 us
    Leave: myapp.main, Duration: 120.811 us

``Resume``/``Yield`` open and close a generator or coroutine activation (``Enter`` is its
first start, ``Leave`` its return).

**Base time.** The stack entries ``stack[1:k]`` have had their opening line written;
``k`` lives in the root entry (``stack[0].kind``). Entries above ``k`` are *pending*. An
opening line is written — once, never retracted — as soon as its call is certain to be
shown: when it closes after at least the base time, when a descendant is shown (a
descendant's duration is a lower bound of its own), or when it has already been running
for the base time at the next event on its thread. Pending entries always form the top of
the stack, so each check looks at one entry: linear work, no re-printing.
"""

from __future__ import annotations

from collections.abc import Callable

from profkit.profilers.elt.tree import Node

TYPE_CHECKING = False  # typing's, without importing typing at run time (profkit run's start-up)
if TYPE_CHECKING:
    from typing import Any

_INDENT = "    "
#: Deepest indent a line gets, in levels; deeper lines keep it (issue #22: a program
#: recursing 8,000 deep streamed lines of up to 32 KB of spaces, quadratic in depth). One
#: more than the monitor's deepest self-time account (``monitor.functions.MAX_DEPTH``), so
#: it reads every line exactly as before (the .NET profiler caps at 4096, also above it).
#: The C twin (``csrc/lines.c``) applies the same number.
MAX_INDENT_LEVELS = 1025


def indent(levels: int) -> str:
    """Four spaces per level, at most :data:`MAX_INDENT_LEVELS` of them."""
    return _INDENT * (levels if levels < MAX_INDENT_LEVELS else MAX_INDENT_LEVELS)


def format_duration(duration_ns: int, unit: str) -> str:
    """``12.250 us`` or ``12250 ns``: the unit is always stated."""
    if unit == "ns":
        return f"{duration_ns} ns"
    return f"{duration_ns / 1000:.3f} us"


def on_open(
    stack: list[Node],
    basetime: int,
    now: int,
    name: Callable[[Any], str],
    emit: Callable[[str], None],
) -> None:
    """A call or resumption was pushed on ``stack``: write what is now certain."""
    written = stack[0].kind
    if written < 0:
        return  # a silent stack (see EltProfiler._new_thread)
    if basetime <= 0:
        entry = stack[-1]
        emit(f"{indent(len(stack) - 2)}{entry.kind}: {name(entry.fid)}")
        stack[0].kind = len(stack)
        return
    top = len(stack)
    while written < top and now - stack[written].start >= basetime:
        entry = stack[written]
        emit(f"{indent(written - 1)}{entry.kind}: {name(entry.fid)}")
        written += 1
    stack[0].kind = written


def on_close(
    stack: list[Node],
    entry: Node,
    duration: int,
    kind: str,
    basetime: int,
    name: Callable[[Any], str],
    emit: Callable[[str], None],
    unit: str,
) -> None:
    """``entry`` was popped off ``stack`` (its index was ``len(stack)``)."""
    index = len(stack)
    written = stack[0].kind
    if written < 0:
        return
    if index >= written:
        if duration < basetime:
            return  # hidden, and its opening line was never written: nothing to undo
        # Shown: its pending ancestors are at least as long, so they are shown too.
        for depth in range(written, index):
            pending = stack[depth]
            emit(f"{indent(depth - 1)}{pending.kind}: {name(pending.fid)}")
        emit(f"{indent(index - 1)}{entry.kind}: {name(entry.fid)}")
    emit(
        f"{indent(index - 1)}{kind}: {name(entry.fid)}, Duration: {format_duration(duration, unit)}"
    )
    stack[0].kind = index
