"""Endings that skip every handler: ``os.exec*`` and ``os._exit`` in the profiled process.

Why: trace and memory mode record inside the program's own process, and save when its main
code returns. A program that replaces itself (``os.execv``: autoreloaders, launchers) or
leaves through ``os._exit`` never returns there, so its profile used to vanish silently.

For the run's duration ``os.execv``/``os.execve`` (every other ``os.exec*`` goes through
one of the two) and ``os._exit`` are wrapped, in this process only (a forked child has its
own profiler and passes straight through). The first call, made on the main thread, stops
recording, saves and reports the profile as a normal end would, then makes the real call
with the program's own arguments: its exit status, its new image and its environment are
unchanged (the new image, run with the environment profkit set for child processes, writes
its own profile as a child does).

``os._exit`` is saved from rather than merely reported: the profile is what the user ran
profkit for, and the program's observable ending (status, output written so far) is the
same; the cost is that its other threads run on while the profile is written. From another
thread, stopping the recorder under the main thread's feet is not safe: one note says the
profile was not saved (``--mode sample`` records from outside and survives both endings).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

TYPE_CHECKING = False  # typing's, without importing typing at run time (profkit run's start-up)
if TYPE_CHECKING:
    from typing import Any

#: (module attribute, words for the note)
_EXECS = ("execv", "execve")


class ExitGuard:
    """Wraps ``os.exec*``/``os._exit`` while installed; ``save(why)`` does the saving."""

    def __init__(self, save: Callable[[str], None], say: Callable[[str], None]) -> None:
        self._save = save
        self._say = say
        self._pid = os.getpid()
        self._saved: dict[str, Any] = {}
        #: set once the profile was saved (or given up) at one of these endings
        self.fired: str | None = None

    def install(self) -> None:
        """Put the wrappers in ``os`` (remembering the originals)."""
        for name in (*_EXECS, "_exit"):
            real = getattr(os, name, None)
            if real is None or name in self._saved:
                continue
            self._saved[name] = real
            setattr(os, name, self._wrap(name, real))

    def uninstall(self) -> None:
        """Put the originals back (where nobody replaced our wrappers meanwhile)."""
        for name, real in self._saved.items():
            current = getattr(os, name, None)
            if getattr(current, "__wrapped__", None) is real:
                setattr(os, name, real)
        self._saved.clear()

    def _wrap(self, name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        guard = self

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            guard._before(name)
            return real(*args, **kwargs)

        wrapper.__name__ = real.__name__
        wrapper.__qualname__ = real.__qualname__
        wrapper.__doc__ = real.__doc__
        wrapper.__module__ = getattr(real, "__module__", "posix")
        wrapper.__wrapped__ = real  # type: ignore[attr-defined]
        return wrapper

    def _before(self, name: str) -> None:
        if self.fired is not None or os.getpid() != self._pid:
            return
        how = f"os.{name}"
        self.fired = how
        if threading.current_thread() is not threading.main_thread():
            self._say(
                f"profkit: note: the program called {how} from a thread: its profile was "
                "not saved (--mode sample survives it)\n"
            )
            return
        try:
            self._save(how)
        except Exception as exc:  # the program's call must still happen
            self._say(f"profkit: error: the profile was not saved before {how}: {exc}\n")
