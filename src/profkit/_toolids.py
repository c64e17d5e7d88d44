"""The ``sys.monitoring`` tool ids profkit holds, and giving one up when the program wants it.

PEP 669 has six tool ids. profkit's collector takes two free ones (4 and 3 first: PEP 669
names 0 debuggers', 1 coverage's, 2 profilers' (cProfile's on 3.12+) and 5 optimizers',
and leaves 3 and 4 to other tools; then 5, which nothing in CPython or the usual tools
claims; 2, 1, 0 only when the program holds the others). The elt profiler's C-call tool
(``profkit-c-calls``, ``profilers/elt/ccalls.py``) takes the third free id in the same
order, leaving the first two to the collector: 5 when the collector takes 4 and 3.

A program that claims one of profkit's ids *by number* after profkit attached
(``sys.monitoring.use_tool_id(4, "mytool")``) would get ``ValueError``. While a session
runs, ``use_tool_id`` is wrapped: such a claim first moves profkit's tool to a free id
(its callbacks, global events and the local events of every code object it armed are
copied over, then the old id is cleared and freed), and then the program's claim goes
through. When no id is free the claim fails as it would with any other tool holding it.
The move runs with a long thread switch interval so other threads do not run events
halfway through it. Every tool profkit holds is watched so (:class:`ClaimWatcher`).
When no id is free to move to, a tool profkit can run without is given up instead: the elt
profiler's C-call tool (C functions are no longer nodes of the profile from then on;
recorded ones keep their times). So a program may use four ids (the collector keeps two).
What stays visible: ``get_tool`` names profkit's ids (``"profkit"``,
``"profkit-discovery"``, ``"profkit-c-calls"``), and ``sys.monitoring.use_tool_id`` is a
Python function while a session runs.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from types import CodeType

TYPE_CHECKING = False  # typing's, without importing typing at run time (profkit run's start-up)
if TYPE_CHECKING:
    from typing import Any

#: ``sys.monitoring`` (3.12+), bound once; typed Any so mypy at 3.11 accepts it.
MON: Any = getattr(sys, "monitoring", None)

#: Preference order (see the module docstring).
PREFERRED = (4, 3, 5, 2, 1, 0)


def free_ids() -> list[int]:
    """Tool ids nobody holds, in preference order."""
    return [t for t in PREFERRED if MON.get_tool(t) is None]


class ClaimWatcher:
    """Moves one holder's tools off an id the program claims; see the module docstring.

    ``held()`` names the holder's ids now; ``move(tool, spare)`` is the holder's: it moves
    everything from ``tool`` to the already claimed ``spare`` and frees ``tool``. Several
    holders (the collector's two tools, the elt profiler's C-call tool) are watched at
    once through one wrapper of ``use_tool_id``: it is put in place by the first
    :meth:`install` and the real function is back after the last :meth:`uninstall`, in
    whatever order the holders start and stop.
    """

    def __init__(
        self,
        held: Callable[[], tuple[int, ...]],
        move: Callable[[int, int], None],
        release: Callable[[], None] | None = None,
    ) -> None:
        self.held = held
        self.move = move
        #: gives the holder's tools up altogether (a holder profkit can run without: the
        #: C-call tool), when the program claims an id and none is left to move to
        self.release = release

    def install(self) -> None:
        """Watch this holder's ids (idempotent)."""
        if self in _WATCHERS:
            return
        _WATCHERS.append(self)
        if len(_WATCHERS) == 1:
            _wrap()

    def uninstall(self) -> None:
        """Stop watching; the last holder to go restores the real ``use_tool_id`` (unless
        someone wrapped it after us)."""
        if self in _WATCHERS:
            _WATCHERS.remove(self)
            if not _WATCHERS:
                _unwrap()


#: The holders watched now, in install order.
_WATCHERS: list[ClaimWatcher] = []
#: (the ``use_tool_id`` we replaced, our wrapper) while one is in place.
_WRAPPED: list[tuple[Any, Any]] = []


def _wrap() -> None:
    original = MON.use_tool_id

    def use_tool_id(tool_id: int, name: str, /) -> None:
        holder = MON.get_tool(tool_id)
        if holder is not None:
            watchers = list(_WATCHERS)
            watcher = next((w for w in watchers if tool_id in w.held()), None)
            spare = next((t for t in free_ids() if t != tool_id), None)
            if watcher is not None and spare is None:
                # No id left to move to: give up a tool profkit can do without (the
                # C-call tool) rather than fail the program's claim (issue 22, item 14:
                # a program using four tools died with "tool 3 is already in use").
                spare = _release_one(watchers, watcher, tool_id)
            if watcher is not None and spare is not None and MON.get_tool(tool_id) is not None:
                original(spare, holder)
                _without_switches(lambda: watcher.move(tool_id, spare))
        original(tool_id, name)

    _WRAPPED.append((original, use_tool_id))
    MON.use_tool_id = use_tool_id


def _release_one(watchers: list[ClaimWatcher], claimed: ClaimWatcher, tool_id: int) -> int | None:
    """Release a releasable holder's tools, the claimed id's own holder first; the id to
    move to now (None: ``tool_id`` itself is free now, or nothing could be released)."""
    ordered = [claimed, *(w for w in watchers if w is not claimed)]
    for watcher in ordered:
        release = watcher.release
        if release is None or not watcher.held():
            continue
        _without_switches(release)
        if MON.get_tool(tool_id) is None:
            return None
        return next((t for t in free_ids() if t != tool_id), None)
    return None


def _unwrap() -> None:
    while _WRAPPED:
        original, wrapper = _WRAPPED.pop()
        if MON.use_tool_id is wrapper:
            MON.use_tool_id = original


def transplant(tool: int, spare: int, events: Iterable[int], codes: Iterable[CodeType]) -> None:
    """Move callbacks, global events and ``codes``' local events from ``tool`` to ``spare``
    (already claimed), then clear and free ``tool``."""
    mon = MON
    for event in events:
        callback = mon.register_callback(tool, event, None)
        if callback is not None:
            mon.register_callback(spare, event, callback)
    for code in codes:
        local = mon.get_local_events(tool, code)
        if local:
            mon.set_local_events(spare, code, local)
            mon.set_local_events(tool, code, 0)
    mon.set_events(spare, mon.get_events(tool))
    mon.set_events(tool, 0)
    mon.free_tool_id(tool)


def _without_switches(body: Callable[[], None]) -> None:
    """Run ``body`` with no thread switch in between (short and non-blocking)."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1.0)
    try:
        body()
    finally:
        sys.setswitchinterval(interval)
