"""One look at a process: every thread's stack now (``profkit dump``), and whether a
process can be sampled at all (the ``run`` fallback's question)."""

from __future__ import annotations

from profkit._text import escape
from profkit.sampler.errors import AttachError
from profkit.sampler.reader import StackReader, ThreadStack
from profkit.sampler.recorder import thread_label


def dump(pid: int) -> list[ThreadStack]:
    """Every thread's stack of ``pid`` now (one sample; no waiting), with ``threading``'s
    names where they can be read."""
    reader = StackReader.attach(pid)
    stacks = reader.sample(want_gil=True)
    for s in stacks:
        s.name = reader.thread_name(s.thread_id) or ""
    return stacks


def format_dump(pid: int, stacks: list[ThreadStack]) -> str:
    """``profkit dump``'s text: each thread, innermost frame first, like a traceback upside down."""
    lines = []
    for s in stacks:
        name = s.name or thread_label(pid, s.native_id)
        gil = " [holds the GIL]" if s.holds_gil else ""
        lines.append(f"Thread {s.native_id} ({escape(name)}){gil}:")
        if not s.frames:
            lines.append("    (no Python frames)")
        for info, line in s.frames:
            # Names and files come from the target: never let them drive the terminal.
            lines.append(f"    {escape(info.name, 512)} ({escape(info.filename, 512)}:{line})")
    return "\n".join(lines) + ("\n" if lines else "")


def is_sampleable(pid: int) -> str | None:
    """None when ``pid`` can be sampled, else the one-line reason (for the run fallback)."""
    try:
        StackReader.attach(pid)
    except AttachError as exc:
        return str(exc)
    return None
