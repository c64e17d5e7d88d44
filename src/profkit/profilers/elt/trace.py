"""Trace mode's hot path: enter/leave/yield/resume on per-thread stacks of tree nodes.

Every notification costs a few attribute operations and one clock read, nothing more:

* the per-thread stack holds the tree :class:`~profkit.profilers.elt.tree.Node` objects
  themselves — a call-tree node is a *path*, so it is active at most once per thread at a
  time and can carry its current activation's start time without allocating a stack
  entry per call;
* self time needs no per-call bookkeeping at all: a node's self time is its inclusive
  time minus its children's, computed once when the profile is built
  (:func:`~profkit.profilers.elt.tree.convert`). A hidden call (below the base time) adds
  to no node, so its time stays in its caller's self time;
* the clock is read *last* on entry and *first* on exit, so our own bookkeeping is
  charged to the caller, not to the callee;
* streaming (event lines) and the unusual paths (a leave that does not match the top
  of the stack) live in separate methods: the profiler holds a :class:`PythonRecorder`
  (closures, no lines) or a :class:`LineRecorder` (event lines) and hands the collector
  that recorder's :meth:`~PythonRecorder.call_events`, so the plain path never even tests
  whether lines are wanted.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from profkit.api import CallEvents
from profkit.api.ids import FunctionId
from profkit.profilers.elt import lines as _lines
from profkit.profilers.elt.tree import Node

TYPE_CHECKING = False  # typing's, without importing typing at run time (profkit run's start-up)
if TYPE_CHECKING:
    from typing import Any

Stack = list[Node]
#: a call notification as the collector binds it
CallHook = Callable[[FunctionId], None]
_INDENT = "    "
_CAP = _lines.MAX_INDENT_LEVELS  # inlined below: these two lines are the hot path


class PythonRecorder:
    """Trace mode's pure-Python recorder, without event lines: per-thread stacks of tree
    nodes, the base time and the timeline. The profiler owns the threads' stacks
    (``new_thread`` makes one and decides whether the thread is recorded); the recorder
    owns what an event does to them."""

    def __init__(
        self,
        local: threading.local,
        clock: Callable[[], int],
        basetime: int,
        new_thread: Callable[[], Stack],
        name: Callable[[FunctionId], str],
        *,
        names: dict[FunctionId, str] | None = None,
        emit: Callable[[str], None] | None = None,
        unit: str = "us",
        spans: list[tuple[int, int, int, int, int]] | None = None,
        span_cap: int = 0,
    ) -> None:
        self._local = local
        self._clock = clock
        self._basetime = basetime
        self._new_thread = new_thread
        self._name = name
        #: the names ``name`` has made (read first: a dict lookup is cheaper than a call)
        self._names: dict[FunctionId, str] = {} if names is None else names
        self._emit = emit
        self._unit = unit
        #: timeline: (id of the thread's stack, fid, start, end, depth) per shown call, or None
        self._spans = spans
        self._span_cap = span_cap
        #: shown calls past the timeline's cap (counted, not kept)
        self.spans_dropped = 0

    def call_events(self) -> CallEvents:
        """The plain path as closures over locals (see :meth:`_closures`)."""
        enter, leave = self._closures()
        return CallEvents(
            function_enter=enter, function_leave=leave, function_yield=leave, function_resume=enter
        )

    # The general forms: lines, base time, timeline, resync. A generator/coroutine
    # activation is a call of its node (see docs/elt.md).
    def enter(self, function_id: FunctionId) -> None:
        self._open(function_id, "Enter")

    def leave(self, function_id: FunctionId) -> None:
        self._leave(function_id, "Leave")

    def resume(self, function_id: FunctionId) -> None:
        self._open(function_id, "Resume")

    def yield_(self, function_id: FunctionId) -> None:
        self._leave(function_id, "Yield")

    # -- the general forms -----------------------------------------------------------------
    def _open(self, function_id: FunctionId, kind: str) -> None:
        try:
            stack = self._local.stack
        except AttributeError:
            stack = self._new_thread()
        node = stack[-1].child(function_id)
        node.kind = kind
        stack.append(node)
        node.start = self._clock()
        if self._emit is not None:
            _lines.on_open(stack, self._basetime, node.start, self._name, self._emit)

    def _leave(self, function_id: FunctionId, kind: str) -> None:
        now = self._clock()
        try:
            stack = self._local.stack
        except AttributeError:
            return
        node = stack.pop()
        if node.fid != function_id:
            stack.append(node)
            self._resync(stack, function_id, now, kind)
            return
        self._close(stack, node, now, kind)

    def _close(self, stack: Stack, node: Node, now: int, kind: str) -> None:
        """Record one finished activation of ``node`` (just popped off ``stack``)."""
        duration = now - node.start
        if duration >= self._basetime:
            node.calls += 1
            node.incl += duration
            if duration > node.max:
                node.max = duration
            if duration < node.min:
                node.min = duration
            spans = self._spans
            if spans is not None:
                if len(spans) < self._span_cap:
                    spans.append((id(stack), node.fid, node.start, now, len(stack) - 1))  # type: ignore[arg-type]
                else:
                    self.spans_dropped += 1
        if self._emit is not None:
            _lines.on_close(
                stack, node, duration, kind, self._basetime, self._name, self._emit, self._unit
            )

    def _resync(self, stack: Stack, function_id: FunctionId, now: int, kind: str) -> None:
        """A leave that does not match the top of the stack.

        If the function is deeper in the stack, the calls above it missed their leave
        (they are closed now, at the same instant); if it is not on the stack at all, it
        was entered before profiling began, and the event is ignored.
        """
        for depth in range(len(stack) - 1, 0, -1):
            if stack[depth].fid == function_id:
                while len(stack) > depth + 1:
                    self._close(stack, stack.pop(), now, "Leave")
                self._close(stack, stack.pop(), now, kind)
                return

    def close_open(self, stack: Stack, now: int) -> int:
        """Close calls still running at the end (other threads, a killed program)."""
        emit, self._emit = self._emit, None  # their lines would go nowhere now
        closed = 0
        try:
            while len(stack) > 1:
                closed += 1
                self._close(stack, stack.pop(), now, "Leave")
        finally:
            self._emit = emit
        return closed

    # -- the plain path as closures -------------------------------------------------------------
    def _closures(self) -> tuple[CallHook, CallHook]:
        """The plain path as closures over locals (no ``self.`` lookups per event).

        The same logic as the general :meth:`_open`/:meth:`_close` without event lines
        (which keep the general forms: a line per call costs far more than the method call
        saved here); reading cells instead of instance attributes saves about a tenth of
        the per-call cost. The timeline test sits inside the shown-call branch: one
        ``is None`` per recorded call, against a duplicate closure. The thread-local, clock and
        base time are fixed for the profiler's life, which is why pausing swaps stacks,
        never ``_local``.
        """
        local = self._local
        clock = self._clock
        basetime = self._basetime
        new_thread = self._new_thread
        resync = self._resync
        spans = self._spans
        cap = self._span_cap

        def enter(function_id: FunctionId) -> None:
            try:
                stack = local.stack
            except AttributeError:
                stack = new_thread()
            try:
                node = stack[-1].children[function_id]
            except KeyError:
                node = stack[-1].child(function_id)
            stack.append(node)
            node.start = clock()

        def leave(function_id: FunctionId) -> None:
            now = clock()
            try:
                stack = local.stack
            except AttributeError:
                return
            node = stack.pop()
            if node.fid != function_id:
                stack.append(node)
                resync(stack, function_id, now, "Leave")
                return
            duration = now - node.start
            if duration >= basetime:
                node.calls += 1
                node.incl += duration
                if duration > node.max:
                    node.max = duration
                if duration < node.min:
                    node.min = duration
                if spans is not None:
                    if len(spans) < cap:
                        spans.append((id(stack), function_id, node.start, now, len(stack) - 1))
                    else:
                        self.spans_dropped += 1

        return enter, leave


class LineRecorder(PythonRecorder):
    """The pure-Python recorder writing event lines through ``emit``
    (:mod:`~profkit.profilers.elt.lines`)."""

    def __init__(self, *args: Any, emit: Callable[[str], None], **kwargs: Any) -> None:
        super().__init__(*args, emit=emit, **kwargs)
        #: ``emit``, never None (``close_open`` silences ``_emit`` alone): the inlined forms'
        self._write = emit

    def call_events(self) -> CallEvents:
        """The general forms, which write lines whenever ``_emit`` is set; without a base
        time (and timeline) every line is final at once, so ``Enter``/``Leave`` use
        inlined variants (no pending-line bookkeeping)."""
        now = self._basetime <= 0 and self._spans is None
        return CallEvents(
            function_enter=self._enter_now if now else self.enter,
            function_leave=self._leave_now if now else self.leave,
            function_yield=self.yield_,
            function_resume=self.resume,
        )

    def _enter_now(self, function_id: FunctionId) -> None:
        try:
            stack = self._local.stack
        except AttributeError:
            stack = self._new_thread()
        root = stack[0]
        if root.kind < 0:  # a silent stack
            node = stack[-1].child(function_id)
            stack.append(node)
            return
        node = stack[-1].child(function_id)
        node.kind = "Enter"
        name = self._names.get(function_id) or self._name(function_id)
        depth = len(stack) - 1
        self._write(f"{_INDENT * (depth if depth < _CAP else _CAP)}Enter: {name}")
        stack.append(node)
        root.kind = len(stack)
        node.start = self._clock()

    def _leave_now(self, function_id: FunctionId) -> None:
        now = self._clock()
        try:
            stack = self._local.stack
        except AttributeError:
            return
        node = stack.pop()
        # The fid test comes first: when the root itself was popped (a leave with nothing
        # entered), stack[0] does not exist and the general form ignores the leave.
        if node.fid != function_id or stack[0].kind < 0 or self._unit != "us":
            stack.append(node)
            self._leave(function_id, "Leave")
            return
        root = stack[0]
        duration = now - node.start
        node.calls += 1
        node.incl += duration
        if duration > node.max:
            node.max = duration
        if duration < node.min:
            node.min = duration
        name = self._names.get(function_id) or self._name(function_id)
        index = len(stack)
        self._write(
            f"{_INDENT * (index - 1 if index <= _CAP else _CAP)}Leave: {name}, "
            f"Duration: {duration / 1000:.3f} us"
        )
        root.kind = index
