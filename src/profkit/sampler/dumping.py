"""One look at a process: every thread's stack now (``profkit dump``), and whether a
process can be sampled at all (the ``run`` fallback's question)."""

from __future__ import annotations

from profkit._record import record
from profkit._text import escape
from profkit.sampler.errors import AttachError
from profkit.sampler.pywalk import CUT_CYCLE, CUT_DEPTH
from profkit.sampler.reader import (
    CUT_INTERPS_CYCLE,
    CUT_INTERPS_DEPTH,
    CUT_THREADS_CYCLE,
    CUT_THREADS_DEPTH,
    MAX_DEPTH,
    MAX_INTERPRETERS,
    MAX_THREADS,
    StackReader,
    ThreadStack,
)
from profkit.sampler.recorder import thread_label

#: What the dump says when a walk stopped early: a torn or hostile target's lists may loop
#: or run on, and a dump that stops without saying so would look like the program's state.
_FRAMES_CUT = {
    CUT_DEPTH: f"(walk cut: more than {MAX_DEPTH} frames)",
    CUT_CYCLE: "(walk cut: the frame chain loops back on itself)",
}
_LISTS_CUT = (
    (CUT_THREADS_CYCLE, "(thread list cut: it loops back on itself)"),
    (CUT_THREADS_DEPTH, f"(thread list cut: more than {MAX_THREADS} threads)"),
    (CUT_INTERPS_CYCLE, "(interpreter list cut: it loops back on itself)"),
    (CUT_INTERPS_DEPTH, f"(interpreter list cut: more than {MAX_INTERPRETERS} interpreters)"),
)


@record
class Dump:
    """One look at a process: its threads' stacks, and ``lists_cut`` (the reader's
    ``CUT_THREADS_*`` / ``CUT_INTERPS_*`` flags) when a list was not walked to its end."""

    threads: list[ThreadStack]
    lists_cut: int = 0


def dump(pid: int) -> Dump:
    """Every thread's stack of ``pid`` now (one sample; no waiting), with ``threading``'s
    names where they can be read."""
    reader = StackReader.attach(pid)
    stacks = reader.sample(want_gil=True)
    for s in stacks:
        s.name = reader.thread_name(s.thread_id) or ""
    return Dump(stacks, reader.lists_cut)


def format_dump(pid: int, found: Dump) -> str:
    """``profkit dump``'s text: each thread, innermost frame first, like a traceback upside
    down; a walk or list that was stopped early says so where it stopped."""
    lines = []
    for s in found.threads:
        name = s.name or thread_label(pid, s.native_id)
        gil = " [holds the GIL]" if s.holds_gil else ""
        lines.append(f"Thread {s.native_id} ({escape(name)}){gil}:")
        if not s.frames:
            lines.append("    (no Python frames)")
        for info, line in s.frames:
            # Names and files come from the target: never let them drive the terminal.
            lines.append(f"    {escape(info.name, 512)} ({escape(info.filename, 512)}:{line})")
        if s.cut:
            lines.append(f"    {_FRAMES_CUT.get(s.cut, '(walk cut)')}")
    lines += [text for flag, text in _LISTS_CUT if found.lists_cut & flag]
    return "\n".join(lines) + ("\n" if lines else "")


def is_sampleable(pid: int) -> str | None:
    """None when ``pid`` can be sampled, else the one-line reason (for the run fallback)."""
    try:
        StackReader.attach(pid)
    except AttachError as exc:
        return str(exc)
    return None
