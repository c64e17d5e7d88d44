"""The :class:`~profkit.api.ProfilerInfo` a profiler gets: the session's public face.

It validates what the profiler asks (immutable bits, what the backend can deliver, ids)
and hands the change to the session, or answers from the catalog. It holds nothing of
its own, so every answer is the session's current state.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterable
from types import FrameType

from profkit.api.errors import (
    ImmutableFlagError,
    NotAvailableError,
    UnknownIdError,
    UnsupportedEventError,
)
from profkit.api.events import IMMUTABLE, EventMask
from profkit.api.ids import FunctionId, ModuleId, ObjectId, ThreadId
from profkit.api.info import FunctionInfo, ModuleInfo, ProfilerInfo, ThreadInfo
from profkit.collect.idtables import FunctionTable

TYPE_CHECKING = False  # typing's, without importing typing at run time (profkit run's start-up)
if TYPE_CHECKING:
    from typing import Any

    from profkit.api.strata import Strata
    from profkit.collect.session import Session

_get_ident = threading.get_ident


class SessionInfo:
    """The ``ProfilerInfo`` implementation for one attached profiler."""

    def __init__(self, session: Session) -> None:
        self._session = session
        self._catalog = session.catalog

    @property
    def backend_name(self) -> str:
        """The collector in use."""
        return self._session.backend_name

    def backend_for(self, mask: EventMask) -> str:
        """The collector in use, else the one the requested backend picks for ``mask``
        (its name, unchanged, when none can deliver it: the attach then says why)."""
        session = self._session
        if session.backend is not None:
            return session.backend.name
        from profkit.collect.select import choose

        try:
            return choose(session.requested_backend, mask).name
        except UnsupportedEventError:
            return session.requested_backend

    @property
    def native(self) -> bool:
        """Whether the collector may use its C parts (``attach(native=)``)."""
        return self._session.native

    @property
    def sample_interval(self) -> float:
        """Seconds between samples (``attach(sample_interval=)``)."""
        return self._session.sample_interval

    @property
    def sample_clock(self) -> str:
        """``"wall"`` or ``"cpu"`` (``attach(sample_clock=)``)."""
        return self._session.sample_clock

    @property
    def functions(self) -> FunctionTable:
        """The function id table (tests and diagnostics read its ``codes``)."""
        return self._catalog.functions

    @property
    def _lock(self) -> Any:
        """The session's lock (a fork test holds it to prove the child never waits)."""
        return self._session._lock

    def set_event_mask(self, mask: EventMask) -> None:
        """Select notifications (see :meth:`profkit.api.ProfilerInfo.set_event_mask`)."""
        session = self._session
        mask = EventMask(mask)
        if not session.initializing and (mask ^ session.mask) & IMMUTABLE:
            changed = EventMask((mask ^ session.mask) & IMMUTABLE)
            raise ImmutableFlagError(
                f"event-mask bits {changed!r} are immutable: set them in initialize()"
            )
        missing = mask & ~session.capabilities_events
        if missing:
            raise UnsupportedEventError(
                f"the {session.backend_name} backend cannot deliver {EventMask(missing)!r}"
            )
        session.apply_mask(mask)

    def get_event_mask(self) -> EventMask:
        """The current event mask."""
        return self._session.mask

    def set_function_filter(self, accept: Callable[[FunctionInfo], bool]) -> None:
        """Decide once per function whether its notifications are delivered."""
        self._session.apply_filter(lambda: self._catalog.set_filter(accept))

    def set_function_events(self, function_id: FunctionId, mask: EventMask) -> None:
        """Override the filter for one function (see :class:`~profkit.api.ProfilerInfo`)."""
        self._catalog.functions.info(function_id)  # validates the id, outside the lock
        self._session.apply_filter(lambda: self._catalog.set_function_events(function_id, mask))

    def get_function_info(self, function_id: FunctionId) -> FunctionInfo:
        """What is known about a function id."""
        return self._catalog.functions.info(function_id)

    def get_module_info(self, module_id: ModuleId) -> ModuleInfo:
        """What is known about a module id."""
        return self._catalog.modules.info(module_id)

    def get_thread_info(self, thread_id: ThreadId) -> ThreadInfo:
        """What is known about a thread id."""
        return self._catalog.threads.info(thread_id)

    def get_current_thread_id(self) -> ThreadId:
        """The calling thread's id (``threading.get_ident()``)."""
        return ThreadId(_get_ident())

    def iter_threads(self) -> Iterable[ThreadId]:
        """Live threads."""
        return self._catalog.threads.live()

    def get_shadow_stack(self, thread_id: ThreadId) -> tuple[FunctionId, ...]:
        """The stack of accepted functions that were entered, outermost first.

        The CLR keeps a shadow stack because walking a native stack is expensive. CPython
        already keeps exactly this stack as linked frames (a suspended generator is off it,
        a resumed one on it, an unwound frame gone), so profkit reads it on demand instead
        of pushing and popping per event: the same answer, and zero cost per event.
        Frames that were already running at attach (never entered) are left out (by frame
        address and code, so a later frame at a reused address could rarely be left out
        too). During a notification about function F, F is on top.
        """
        if not self._session.mask & EventMask.ENABLE_SHADOW_STACK:
            raise NotAvailableError("get_shadow_stack needs EventMask.ENABLE_SHADOW_STACK")
        frame = self._frame_of(thread_id)
        return self._catalog.shadow_stack(frame, self._session.attach_frames)

    def _frame_of(self, thread_id: ThreadId) -> FrameType | None:
        if thread_id == _get_ident():
            return sys._getframe(2)
        frame = sys._current_frames().get(thread_id)
        if frame is None:
            raise UnknownIdError(f"thread {thread_id} is not running Python code")
        return frame

    def do_stack_snapshot(self, thread_id: ThreadId) -> tuple[FunctionId, ...]:
        """The thread's live Python frames now, outermost first (profkit's own omitted)."""
        if not self._session.mask & EventMask.ENABLE_STACK_SNAPSHOT:
            raise NotAvailableError("do_stack_snapshot needs EventMask.ENABLE_STACK_SNAPSHOT")
        frame = self._frame_of(thread_id)
        return self._catalog.frames_to_ids(frame, accepted_only=False)

    # -- heap (OBJECT_ALLOCATED) ----------------------------------------------------------
    def set_allocation_sampling(self, mean_bytes: float) -> None:
        """Mean bytes between sampled allocations; only in ``initialize`` (the sampler
        starts with the session, like the CLR's immutable ``OBJECT_ALLOCATED``)."""
        if not self._session.initializing:
            raise ImmutableFlagError("set the allocation sampling in initialize()")
        if not 1 <= mean_bytes <= 1e15:
            raise ValueError(f"sampling mean must be between 1 byte and 1e15, not {mean_bytes}")
        self._session.allocation_sampling = float(mean_bytes)

    def get_allocation_sampling(self) -> float:
        """Mean bytes between sampled allocations."""
        return self._session.allocation_sampling

    def get_object_size(self, object_id: ObjectId) -> int:
        """Bytes allocated for a sampled object still alive."""
        return self._heap_object(object_id)[0]

    def get_class_from_object(self, object_id: ObjectId) -> str:
        """Type name of a sampled object still alive."""
        return self._heap_object(object_id)[1]

    def get_allocation_strata(self) -> Strata | None:
        """The hooks' exact tallies by size class (see :meth:`ProfilerInfo.get_allocation_strata`)."""
        from profkit.collect.heap_events import HeapEvents
        from profkit.heap.sampler import allocation_strata

        for part in self._session.extras:
            if isinstance(part, HeapEvents):
                part.flush()  # the samples the strata count are then the ones delivered
                return allocation_strata() if part.sampler.native else None
        raise NotAvailableError("OBJECT_ALLOCATED is not in the event mask")

    def _heap_object(self, object_id: ObjectId) -> tuple[int, str]:
        from profkit.collect.heap_events import HeapEvents

        for part in self._session.extras:
            if isinstance(part, HeapEvents):
                part.flush()  # an id the profiler holds may have died since the last batch
                found = part.live.get(object_id)
                if found is None:
                    raise UnknownIdError(f"object id {object_id:#x} is not alive")
                return found
        raise NotAvailableError("OBJECT_ALLOCATED is not in the event mask")

    def walk_heap(self) -> None:
        """Deliver the heap graph to the profiler (see :meth:`ProfilerInfo.walk_heap`)."""
        from profkit.collect.plan import overridden
        from profkit.heap import sampler
        from profkit.heap.walk import walk_heap

        session = self._session
        if not session.active:
            raise NotAvailableError("the profiler is detached")
        on_object = overridden(session.profiler, "object_references")
        on_roots = overridden(session.profiler, "root_references")
        if on_object is None and on_roots is None:
            return
        hook = None if sampler._IMPORT_ERROR else sampler._heaphook
        if hook is not None:
            hook.pause()  # the walk's allocations (and the callbacks') are not the program's
        try:
            walk_heap(
                on_object or _no_object, on_roots or _no_roots, skip_code=self._catalog.is_own
            )
        except RecursionError:
            pass  # the program's, as everywhere (see collect.failure)
        except BaseException as exc:
            session.rule.fail(exc, "walk_heap")
        finally:
            if hook is not None:
                hook.resume()

    def request_profiler_detach(self) -> None:
        """Remove every hook; ``profiler_detach_succeeded`` then ``shutdown`` follow."""
        self._session.detach(detach_callback=True)


def _no_object(object_id: int, type_name: str, size: int, refs: tuple[int, ...]) -> None:
    """object_references not overridden."""


def _no_roots(root_ids: tuple[int, ...], kinds: tuple[str, ...]) -> None:
    """root_references not overridden."""


def _conforms(info: SessionInfo) -> ProfilerInfo:
    """mypy checks here that SessionInfo implements the ProfilerInfo protocol."""
    return info
