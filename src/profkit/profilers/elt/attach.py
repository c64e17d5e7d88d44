"""When an environment-activated profiler's recording may begin: after ``attach``.

The start-up hook cannot say when the collector's ``attach`` has returned; until then the
events are the collector's own start-up work. :class:`AttachWatch` notes the frame whose
return ends that work and answers, while paused, whether it has returned.
"""

from __future__ import annotations

import atexit
import sys
from collections.abc import Callable
from types import FrameType


class AttachWatch:
    """Held by the profiler: :meth:`note` at ``initialize``, :meth:`done` after; once
    done, ``stop_events`` is registered to run at exit."""

    def __init__(self, stop_events: Callable[[], None]) -> None:
        self._stop_events = stop_events
        self._attach_frame: FrameType | None = None

    def done(self) -> bool:
        """True once the collector's ``attach`` call has returned.

        An environment-activated profiler cannot be told when ``attach`` has finished;
        until then the events are the collector's own start-up work (its enum, dataclass
        and threading calls), which belong to no program. ``initialize`` noted the
        outermost ``profkit.collect`` frame that called it; while that frame is still on
        the stack, we are inside ``attach``. Checked only while paused. Once done, an
        ``atexit`` hook stops recording before the collector's own detach (registered
        after the collector's hook, so it runs first).
        """
        marker = self._attach_frame
        if marker is not None:
            frame: FrameType | None = sys._getframe(1)
            while frame is not None:
                if frame is marker:
                    return False
                frame = frame.f_back
            self._attach_frame = None
        atexit.register(self._stop_events)
        return True

    def note(self) -> None:
        """Remember the frame whose return ends the start-up work (see :meth:`done`).

        That is the outermost ``profkit.collect`` frame of the chain that called
        ``initialize`` — or, when the start-up hook runs from a ``.pth`` file, the
        outermost ``site`` frame: the rest of ``site``'s start-up (user site-packages,
        ``sitecustomize``) is the interpreter's, not the program's.
        """
        frame: FrameType | None = sys._getframe(2)
        outermost = None
        in_profkit = True
        while frame is not None:
            name = str(frame.f_globals.get("__name__"))
            if in_profkit and not name.startswith("profkit."):
                in_profkit = False
            if (in_profkit and name.startswith("profkit.collect")) or name == "site":
                outermost = frame
            frame = frame.f_back
        self._attach_frame = outermost
