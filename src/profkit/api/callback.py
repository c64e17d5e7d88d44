"""``ProfilerCallback``: the notifications a profiler receives (``ICorProfilerCallback``).

Subclass it and override what you need; every method has a no-op default, so a
profiler only pays for what it implements *and* selects in its event mask.

Threading and reentrancy rules (as in the CLR, callbacks are **not serialized**):

* A notification runs on the thread where the event happened (sampling: on the sampler
  thread). Two threads can be inside callbacks at the same time; protect shared state.
* While a callback runs, profkit suppresses notifications caused by the callback's own
  code on that thread (no recursion into the profiler).
* A callback that raises is reported once on stderr; the profiler is then detached and
  the program goes on unaffected.
* ``function_leave`` is delivered for every exit of a function, by ``return`` or by an
  exception unwinding through it, so enter/leave always pair up; a generator or coroutine
  that suspends gets ``function_yield`` instead, and ``function_resume`` when it continues.
  Frames already running when the profiler attached are never reported (no leave without
  its enter). A suspended generator that is closed or collected may end without a further
  notification (3.13 closes simple generators without running them), so a profiler must
  not wait for every yielded generator to leave.
* Only functions accepted by the function filter are reported (enter/leave, arguments,
  return values, transitions from them, exceptions in them, frames in stack samples).
  profkit's own collector code and the profiler's own methods are never reported.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from profkit._record import record
from profkit.api.ids import FunctionId, ModuleId, ObjectId, ThreadId

TYPE_CHECKING = False  # typing's, without importing typing at run time (profkit run's start-up)
if TYPE_CHECKING:
    from profkit.api.info import ProfilerInfo


#: A call notification given as a plain callable (``enter(function_id)``).
CallHook = Callable[[FunctionId], None]


@record(frozen=True)
class CallEvents:
    """The call notifications as callables a profiler hands over (:meth:`ProfilerCallback.call_events`).

    For a profiler whose hot path is not its own methods: a recorder it chose in
    ``initialize`` (closures over locals, a C object's methods), bound by the collector as
    they are, with no method of the profiler's in between. A field left ``None`` falls back
    to the profiler's method of that name (the no-op when it does not override it).
    """

    function_enter: CallHook | None = None
    function_leave: CallHook | None = None
    function_yield: CallHook | None = None
    function_resume: CallHook | None = None
    python_to_native_transition: CallHook | None = None
    native_to_python_transition: CallHook | None = None


class ProfilerCallback:
    """Base class of every profiler; all notifications are no-ops by default."""

    def call_events(self) -> CallEvents | None:
        """Where the call notifications go, asked whenever the event mask is set: None
        (the default) means this object's own methods; a :class:`CallEvents` names other
        callables for some of them (which events are delivered is still the mask's)."""
        return None

    # -- lifecycle ------------------------------------------------------------------
    def initialize(self, info: ProfilerInfo) -> None:
        """Called once at attach; set the event mask here (immutable bits only here)."""

    def shutdown(self) -> None:
        """Called once at process exit or detach; write results here."""

    def profiler_detach_succeeded(self) -> None:
        """Called after :meth:`ProfilerInfo.request_profiler_detach` has removed every hook."""

    # -- functions (ENTER_LEAVE, FIRST_EXECUTION, FUNCTION_ARGS, FUNCTION_RETVAL) -----
    def function_first_execution(self, function_id: FunctionId) -> None:
        """A code object runs for the first time (the JIT-compilation analogue)."""

    def function_enter(self, function_id: FunctionId) -> None:
        """A Python function starts (a fresh call, not a generator resume)."""

    def function_leave(self, function_id: FunctionId) -> None:
        """A Python function ends, by return or by an exception unwinding through it."""

    def function_yield(self, function_id: FunctionId) -> None:
        """A generator or coroutine suspends (``yield`` / ``await``)."""

    def function_resume(self, function_id: FunctionId) -> None:
        """A generator or coroutine continues after a suspension."""

    def function_arguments(self, function_id: FunctionId, arguments: Mapping[str, object]) -> None:
        """The arguments of the call just entered (only with ``FUNCTION_ARGS``)."""

    def function_return_value(self, function_id: FunctionId, value: object) -> None:
        """The value about to be returned (only with ``FUNCTION_RETVAL``)."""

    # -- transitions (CODE_TRANSITIONS) -----------------------------------------------
    def python_to_native_transition(self, function_id: FunctionId) -> None:
        """Python code calls a C function (``ManagedToUnmanagedTransition``)."""

    def native_to_python_transition(self, function_id: FunctionId) -> None:
        """A C function called from Python returns or raises (``UnmanagedToManagedTransition``)."""

    # -- exceptions (EXCEPTIONS) --------------------------------------------------------
    def exception_thrown(self, function_id: FunctionId, exception: BaseException) -> None:
        """An exception is raised in (or propagates into) ``function_id``. Only on
        backends with ``full_exceptions`` (``monitoring``)."""

    def exception_unwind_function_leave(self, function_id: FunctionId) -> None:
        """An exception leaves ``function_id`` unhandled (its frame is popped)."""

    def exception_caught(self, function_id: FunctionId, exception: BaseException) -> None:
        """A handler the user wrote in ``function_id`` (``except``, ``finally``, ``with``)
        takes the exception (``ExceptionCatcherEnter``); compiler-made cleanup handlers
        are not reported. Only on backends with ``full_exceptions``."""

    def exception_reraised(self, function_id: FunctionId, exception: BaseException) -> None:
        """A bare ``raise`` or the end of a ``finally`` re-raises the exception in
        ``function_id``. Only on backends with ``full_exceptions``."""

    # -- threads (THREADS) --------------------------------------------------------------
    def thread_created(self, thread_id: ThreadId) -> None:
        """A thread starts running Python code (called on that thread)."""

    def thread_destroyed(self, thread_id: ThreadId) -> None:
        """A thread has finished (called on that thread, as its last notification)."""

    def thread_name_changed(self, thread_id: ThreadId, name: str) -> None:
        """A thread's name was set or changed."""

    # -- modules (MODULE_LOADS) -------------------------------------------------------
    def module_load_started(self, module_id: ModuleId) -> None:
        """An import of a module begins (name known; file may not be yet)."""

    def module_load_finished(self, module_id: ModuleId, error: BaseException | None) -> None:
        """The import ended; ``error`` is the exception if it failed, else ``None``."""

    # -- garbage collection (GC) -------------------------------------------------------
    def garbage_collection_started(self, generation: int) -> None:
        """The cyclic collector starts a collection of ``generation`` (0, 1 or 2)."""

    def garbage_collection_finished(
        self, generation: int, collected: int, uncollectable: int
    ) -> None:
        """The collection ended; counts as ``gc.callbacks`` reports them."""

    def garbage_collection_finished_ex(
        self, generation: int, collected: int, uncollectable: int, duration_ns: int
    ) -> None:
        """As :meth:`garbage_collection_finished`, with how long the collection took.

        A separate method so profilers written against the three-argument form keep
        working; a profiler may override either or both (both are then called, this one
        second). ``duration_ns`` is measured from ``gc.callbacks``' start to stop phase,
        after the ``garbage_collection_started`` callback returned and before the finished
        ones run; other ``gc.callbacks`` run in between are counted in (0 when profkit saw
        no start, e.g. it attached during the collection).
        """

    # -- heap (OBJECT_ALLOCATED) --------------------------------------------------------
    def object_allocated(
        self,
        object_id: ObjectId,
        type_name: str,
        size: int,
        weight: float,
        thread_id: ThreadId,
        function_ids: tuple[FunctionId, ...],
    ) -> None:
        """A sampled allocation (``ObjectAllocated``), with the stack that made it.

        Allocations are sampled by bytes (``info.set_allocation_sampling``): ``weight`` is
        the number of bytes this sample stands for (``size / p``, p the chance an
        allocation of ``size`` bytes is sampled), so summing weights estimates the bytes
        allocated without bias. ``type_name`` is ``module.qualname`` of the object's type
        (``"dict"``, ``"myapp.Point"``), or ``"(buffer)"`` for storage that is not an
        object (list items, bytearray contents, dict tables; also an object whose type
        could not be told).
        ``function_ids`` is the allocating stack, outermost first, ids as in enter/leave.
        Delivered in batches at safe points (after a collection, when enough samples
        are waiting, at detach), on the thread that drains them, not inside the
        allocation: Python cannot run while its allocator does.
        """

    def object_freed(self, object_id: ObjectId) -> None:
        """The sampled block ``object_id`` was freed: its id is dead from here on."""

    # -- heap walk (info.walk_heap) ------------------------------------------------------
    def object_references(
        self, object_id: int, type_name: str, size: int, referenced_ids: tuple[int, ...]
    ) -> None:
        """One object of a heap walk (``ObjectReferences``), on the thread that called
        ``info.walk_heap()``, before it returns.

        Ids here are ``id()`` values (addresses), meaningful only until ``walk_heap``
        returns, and not the sample ids of ``object_allocated``. ``referenced_ids`` are
        what the object refers to, as the GC sees it (``gc.get_referents``); ``size`` is
        ``sys.getsizeof`` (the C size plus the GC header for a class whose
        ``__sizeof__`` is written in Python: the walk runs none of the program's code).
        """

    def root_references(self, root_ids: tuple[int, ...], kinds: tuple[str, ...]) -> None:
        """The roots of a heap walk (``RootReferences2``), once, after every
        ``object_references``. ``kinds[i]`` says why ``root_ids[i]`` is a root:
        ``"module"`` (in ``sys.modules``), ``"frame"`` (a frame of some thread),
        ``"local"`` (a local of such a frame) or ``"unreferenced"`` (no object refers to
        it: held from C, e.g. ``sys.modules`` itself). An object is listed once, with the
        first of those kinds that applies."""

    # -- sampling (SAMPLING) ----------------------------------------------------------
    def stack_sample(
        self,
        thread_id: ThreadId,
        function_ids: tuple[FunctionId, ...],
        timestamp_ns: int,
        weight_ns: int,
    ) -> None:
        """One sampled stack of one thread, outermost frame first.

        ``weight_ns`` is the time this sample stands for (the wall or CPU time since the
        previous sample of that thread). Delivered on the sampler thread.
        """
