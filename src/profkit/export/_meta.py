"""What the exporters take from a profile's metadata (one place, so they agree)."""

from __future__ import annotations

from profkit.calltree.model import CallProfile, ThreadTree


def command_line(profile: CallProfile) -> str | None:
    """The profiled command (``metadata["argv"]`` joined), used as the exports' title;
    ``None`` when the profile does not record it (combined or hand-made profiles)."""
    argv = profile.metadata.get("argv")
    if isinstance(argv, list) and argv:
        return " ".join(str(a) for a in argv)
    return None


def thread_label(profile: CallProfile, thread: ThreadTree) -> str:
    """A thread's name for the exports' lists: :attr:`ThreadTree.label`, the one every
    view shows (the OS thread id when the profile recorded it)."""
    return thread.label
