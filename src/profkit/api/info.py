"""``ProfilerInfo``: what a profiler may ask of profkit (``ICorProfilerInfo``).

This module states the contract as a :class:`typing.Protocol`; the collector provides the
implementation. A profiler receives its ``ProfilerInfo`` in ``initialize`` and may keep it
for the whole session.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from profkit._record import record
from profkit.api.events import EventMask
from profkit.api.ids import FunctionId, ModuleId, ObjectId, ThreadId

TYPE_CHECKING = False  # typing's, without importing typing at run time (profkit run's start-up)
if TYPE_CHECKING:
    from typing import Protocol

    from profkit.api.strata import Strata  # not imported by every run: only memory mode asks for it
else:
    Protocol = object  # the protocols below are for type checkers only


@record(frozen=True)
class FunctionInfo:
    """What is known about a function id (``GetFunctionInfo`` + ``GetTokenAndMetaData``)."""

    function_id: FunctionId
    name: str  #: the qualified name, e.g. ``Parser.parse`` (``__qualname__``)
    module: str  #: the module name, e.g. ``myapp.core`` (``"<native>"`` unknown for C code)
    filename: str  #: source file ("" for C functions)
    first_line: int  #: first line number (0 for C functions)
    is_native: bool  #: True for C functions seen through CODE_TRANSITIONS
    is_generator: bool  #: generator, coroutine or async generator

    @property
    def full_name(self) -> str:
        """``module.qualname``: what filters and reports show."""
        return f"{self.module}.{self.name}" if self.module else self.name


@record(frozen=True)
class ModuleInfo:
    """What is known about a module id (``GetModuleInfo``)."""

    module_id: ModuleId
    name: str
    filename: str | None  #: None until the load finishes, or for built-in modules


@record(frozen=True)
class ThreadInfo:
    """What is known about a thread id."""

    thread_id: ThreadId
    name: str
    native_id: int | None
    is_alive: bool


class ProfilerInfo(Protocol):
    """Services profkit offers a profiler. Safe to call from any callback and any thread."""

    def set_event_mask(self, mask: EventMask) -> None:
        """Select notifications; IMMUTABLE bits may only change inside ``initialize``.

        Raises :class:`~profkit.api.errors.ImmutableFlagError` otherwise, and
        :class:`~profkit.api.errors.UnsupportedEventError` for a category the active
        backend cannot deliver (e.g. ``CODE_TRANSITIONS`` on a sampling-only backend).
        """

    def get_event_mask(self) -> EventMask: ...

    def set_function_filter(self, accept: Callable[[FunctionInfo], bool]) -> None:
        """Decide once per function whether its enter/leave events are delivered.

        Rejected functions cost (almost) nothing afterwards: on ``sys.monitoring`` their
        code objects are answered with ``DISABLE``. Their callees are still seen.
        """

    def set_function_events(self, function_id: FunctionId, mask: EventMask) -> None:
        """Per-function event selection (the analogue of re-instrumenting one routine).

        Overrides the filter's verdict for one function: its notifications are on when
        ``mask`` has ``ENTER_LEAVE``, ``CODE_TRANSITIONS`` or ``EXCEPTIONS``, off otherwise
        (on ``sys.monitoring`` by setting that code object's local events).
        """

    def get_function_info(self, function_id: FunctionId) -> FunctionInfo: ...

    def get_module_info(self, module_id: ModuleId) -> ModuleInfo: ...

    def get_thread_info(self, thread_id: ThreadId) -> ThreadInfo: ...

    def get_current_thread_id(self) -> ThreadId: ...

    def get_shadow_stack(self, thread_id: ThreadId) -> tuple[FunctionId, ...]:
        """The accepted functions entered and not yet left/suspended on that thread,
        outermost first (needs ``ENABLE_SHADOW_STACK``). During a notification about a
        function, that function is on top."""

    def do_stack_snapshot(self, thread_id: ThreadId) -> tuple[FunctionId, ...]:
        """The thread's stack read from its live frames now (needs ``ENABLE_STACK_SNAPSHOT``)."""

    def iter_threads(self) -> Iterable[ThreadId]: ...

    def request_profiler_detach(self) -> None:
        """Remove every hook; ``profiler_detach_succeeded`` follows, then ``shutdown``."""

    def set_allocation_sampling(self, mean_bytes: float) -> None:
        """The mean number of bytes between sampled allocations (``OBJECT_ALLOCATED``;
        default 512 KiB; 1 samples every allocation). Only in ``initialize``."""

    def get_allocation_sampling(self) -> float:
        """The mean number of bytes between sampled allocations."""
        ...

    def get_object_size(self, object_id: ObjectId) -> int:
        """The bytes allocated for a sampled object still alive (``GetObjectSize``)."""
        ...

    def get_allocation_strata(self) -> Strata | None:
        """Every allocation's bytes and count by size class, exactly, since sampling
        started, with the samples taken in each and their summed weights (``OBJECT_ALLOCATED``;
        events waiting are delivered first, so the samples counted are those the profiler
        was given). A profiler scales each sample's weight by its stratum's factor
        (:class:`~profkit.api.strata.Strata`). None where the allocation hooks were not built
        (the tracemalloc fallback samples nothing)."""
        ...

    def get_class_from_object(self, object_id: ObjectId) -> str:
        """The type name of a sampled object still alive (``GetClassFromObject``), as
        ``object_allocated`` gave it."""
        ...

    def walk_heap(self) -> None:
        """Walk the heap now: ``object_references`` for every object the GC can reach,
        then ``root_references`` once, on the calling thread, before returning.

        Needs no event-mask bit (it is on request, like ``ForceGC`` followed by the
        CLR's heap callbacks); call it from any callback or thread, e.g. in
        ``garbage_collection_finished``. It runs none of the program's code and keeps no
        object alive after it returns. Allocations made during the walk (by profkit or by
        the profiler's callbacks) are not sampled for ``object_allocated``.
        """
        ...

    @property
    def backend_name(self) -> str:
        """The collector in use: ``"monitoring"``, ``"setprofile"``, ``"evalframe"`` or
        ``"sampler"`` (before one runs: the one requested, e.g. ``"auto"``)."""
        ...

    def backend_for(self, mask: EventMask) -> str:
        """The collector that runs with ``mask``: the one in use, else the one the
        requested backend (``auto`` too) would pick for it. Why: a profiler that keeps
        per-collector measurements (the ELT profiler's calibration cache) must know in
        ``initialize``, before any collector runs, which one its events will come from."""
        ...
