"""C functions as call-tree nodes: where their events come from, and their names.

Trace mode shows C functions and methods (``TextIOWrapper.write``, ``dict.get``,
``builtins.sorted``) as nodes of their own, their time taken out of the caller's self
time, as cProfile and pyinstrument do (``PROFKIT_C_CALLS=0`` / ``--no-c-calls`` hides
them). The events:

* **3.12+ with the C recorder**: the recorder's ``c_call``/``c_return`` methods are the
  ``CALL``/``C_RETURN``/``C_RAISE`` callbacks of a ``sys.monitoring`` tool id of the
  profiler's own (:class:`MonitoringHook`), so no Python frame runs per C call (see
  ``csrc/ccalls.c``, which also applies the caller rule: only calls made by recorded
  code are recorded);
* **otherwise** (3.11's ``sys.setprofile``, or the pure Python path): the collector's
  ``CODE_TRANSITIONS`` notifications, which it sends for accepted callers only.

Why a tool id of its own rather than the collector's: the collector owns its tools and
their event sets; a separate tool keeps the profiler's C part self-contained, and it is
released when recording stops. Which id, and how it moves when the program claims it by
number (``sys.monitoring.use_tool_id(5, "x")`` must succeed under ``profkit run`` as it
does without it), is ``profkit/_toolids.py``'s: the third free id in its preference
order, the first two being left to the collector (so 5, the collector taking 4 and 3);
it is watched by a :class:`ClaimWatcher` like the collector's own tools, and is the tool
given up when the program claims an id and none is left to move to (C calls are then no
longer recorded; a program may use four ids).
"""

from __future__ import annotations

import os
import sys
import weakref

from profkit._toolids import ClaimWatcher, free_ids, transplant
from profkit.api import FunctionInfo

TYPE_CHECKING = False  # typing's, without importing typing at run time (profkit run's start-up)
if TYPE_CHECKING:
    from typing import Any

#: ``sys.monitoring`` (3.12+), or None.
MON: Any = getattr(sys, "monitoring", None)


def native_name(info: FunctionInfo) -> str:
    """A C function's name as users know it: ``TextIOWrapper.write`` for a method (its
    type's name is enough), ``builtins.sorted`` for a module function."""
    if "." in info.name or not info.module or info.module == "<native>":
        return info.name
    return f"{info.module}.{info.name}"


class MonitoringHook:
    """The C recorder's ``c_call``/``c_return`` as a ``sys.monitoring`` tool's callbacks.

    A forked child inherits the tool with the parent's recorder; the collector gives the
    child a profiler of its own (with its own hook), so the parent's hooks are released
    in the child (:func:`_release_inherited`).
    """

    def __init__(self, recorder: Any) -> None:
        self.recorder = recorder
        self.tool: int | None = None
        self.pid = os.getpid()
        #: moves the tool off an id the program claims (``_toolids.py``)
        self._watcher = ClaimWatcher(self._held, self._move, self._give_up)
        #: the tool was given up to the program (``_toolids.py``): C calls unrecorded since
        self.given_up = False

    @staticmethod
    def available() -> bool:
        return MON is not None

    def start(self) -> bool:
        """Claim a free tool id and turn the events on; False when none can be spared."""
        mon = MON
        if mon is None or self.tool is not None:
            return self.tool is not None
        # It starts before the collector claims its two: leave it the first two free ids
        # and stand aside when there is no third (the collector's transitions then carry
        # the C calls).
        free = free_ids()
        if len(free) < 3:
            return False
        tool = free[2]
        mon.use_tool_id(tool, "profkit-c-calls")
        ev = mon.events
        # The methods as callbacks of their own (csrc/hooks.c: no method call per event)
        on_return = self.recorder.hook("c_return")
        mon.register_callback(tool, ev.CALL, self.recorder.hook("c_call"))
        mon.register_callback(tool, ev.C_RETURN, on_return)
        mon.register_callback(tool, ev.C_RAISE, on_return)
        mon.set_events(tool, ev.CALL | ev.C_RETURN | ev.C_RAISE)
        self.tool = tool
        self.pid = os.getpid()
        _LIVE.add(self)
        self._watcher.install()
        return True

    def stop(self) -> None:
        """Turn the events off and release the tool id (idempotent)."""
        self._watcher.uninstall()
        tool, self.tool = self.tool, None
        mon = MON
        if tool is None or mon is None:
            return
        ev = mon.events
        try:
            mon.set_events(tool, 0)
            for event in (ev.CALL, ev.C_RETURN, ev.C_RAISE):
                mon.register_callback(tool, event, None)
            mon.free_tool_id(tool)
        except ValueError:
            pass  # already released (a fork child, a second stop)

    def _give_up(self) -> None:
        """The program claims an id and none is free: release ours. A C call open on
        some thread closes when its caller returns (the recorder's resync)."""
        self.stop()
        self.given_up = True

    def _held(self) -> tuple[int, ...]:
        return () if self.tool is None else (self.tool,)

    def _move(self, tool: int, spare: int) -> None:
        """The program claims our ``tool``: carry on from ``spare`` (already claimed)."""
        if tool != self.tool:
            return
        ev = MON.events
        transplant(tool, spare, (ev.CALL, ev.C_RETURN, ev.C_RAISE), ())
        self.tool = spare


#: Hooks holding a tool id, to release the parent's in a forked child.
_LIVE: weakref.WeakSet[MonitoringHook] = weakref.WeakSet()


def _release_inherited() -> None:
    """In a forked child: release the tools of hooks started by the parent (a hook the
    child's own profiler has started meanwhile is kept)."""
    # The set's own weak references, read in C: WeakSet's __len__ and __iter__ are Python,
    # which ran in every child (it records there) and were in its profile as its own calls.
    refs: set[weakref.ref[MonitoringHook]] = _LIVE.data  # type: ignore[attr-defined]
    if not refs:
        return
    pid = os.getpid()
    for ref in list(refs):
        hook = ref()
        if hook is not None and hook.pid != pid:
            hook.stop()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_release_inherited)
