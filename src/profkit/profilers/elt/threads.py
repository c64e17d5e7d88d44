"""Who a recorded thread is: Python's id, its name and its OS thread id, taken on it.

Why at the thread's first event: that is the one moment the code runs *on* the thread,
so ``threading.get_native_id()`` is its own id; at the end of the run the thread may be
gone and its Python id reused by another (``get_ident`` values are recycled), so a
lookup by id then could name the wrong thread. The :class:`threading.Thread` is held
weakly, for its name at the end (programs often rename a thread after it started); once
it is gone, the collector's thread table (which follows renames) names it, if that entry
is still this thread.
"""

from __future__ import annotations

import threading
import weakref

from profkit.api import ProfilerInfo
from profkit.api.ids import ThreadId

_get_ident = threading.get_ident
_get_native_id = threading.get_native_id
_current_thread = threading.current_thread


class ThreadMark:
    """One recorded thread (the C recorder's per-thread token; the Python path's key)."""

    __slots__ = ("__weakref__", "ident", "name", "native_id", "thread")

    def __init__(
        self, ident: int, name: str, native_id: int | None, thread: threading.Thread | None
    ) -> None:
        self.ident = ident
        self.name = name
        self.native_id = native_id
        self.thread = weakref.ref(thread) if thread is not None else None

    def current_name(self, info: ProfilerInfo | None = None) -> str:
        """The thread's name now if its ``Thread`` object lives on; else its last name as
        the collector saw it (``info``: it follows renames) when the collector's entry for
        this id is still this thread (same OS id); else its name at its first event."""
        thread = self.thread() if self.thread is not None else None
        if thread is not None:
            return thread.name
        if info is not None:
            try:
                known = info.get_thread_info(ThreadId(self.ident))
            except Exception:  # an id the collector never saw, or forgot
                return self.name
            if known.native_id is not None and known.native_id == self.native_id:
                return known.name
        return self.name


def this_thread() -> ThreadMark:
    """The calling thread's mark."""
    thread = _current_thread()
    return ThreadMark(_get_ident(), thread.name, _get_native_id(), thread)
