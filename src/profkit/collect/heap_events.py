"""``OBJECT_ALLOCATED``: the sampled allocations of :mod:`profkit.heap`, delivered as
``object_allocated`` / ``object_freed`` notifications.

The allocator hooks record in C and cannot call Python (the interpreter is in the middle of
an allocation), so notifications are delivered in batches at safe points: after each full
collection (``gc.callbacks``, generation 2: ``gc.collect()`` included), when the C log holds
:data:`BATCH` events (the hooks ask the interpreter for a pending call), and at detach. While a batch is delivered, allocations of
the delivering thread are not sampled: the profiler's own bookkeeping is not the program's
and must not feed back into more notifications.
"""

from __future__ import annotations

import gc
import os
import threading
from types import CodeType

from profkit.api.events import EventMask
from profkit.api.ids import FunctionId, ObjectId, ThreadId
from profkit.collect.base import Capabilities
from profkit.collect.context import BackendContext
from profkit.heap.sampler import Allocation, AllocationSampler, Free, TypeNames, _heaphook

TYPE_CHECKING = False  # typing's names for type checkers only (profkit run's start-up)
if TYPE_CHECKING:
    from collections.abc import Callable

CAPABILITIES = Capabilities(
    events=EventMask.OBJECT_ALLOCATED, cheap_filter=True, all_threads=True, full_exceptions=False
)

#: A forked child's parent's live objects (:meth:`HeapEvents.resume_after_fork`): kept,
#: never freed, nothing of them used again.
_put_aside: list[dict[int, tuple[int, str]]] = []

#: events waiting in the C log before the interpreter is asked to deliver them
BATCH = 256


class HeapEvents:
    """Runs an :class:`AllocationSampler` for one session and delivers what it saw."""

    name = "heap-events"
    capabilities = CAPABILITIES

    def __init__(self, ctx: BackendContext) -> None:
        self.ctx = ctx
        self.sampler = AllocationSampler(ctx.allocation_sampling, native=ctx.native)
        #: the sampled objects alive now: id -> (size, type name), for get_object_size & co.
        self.live: dict[int, tuple[int, str]] = {}
        self._types = TypeNames()
        self._busy = threading.Lock()
        self._pid = os.getpid()
        self._started = False
        #: the gc.callbacks entry: the hooks' own in C (no Python call per collection)
        self._gc_hook: Callable[[str, dict[str, int]], object] = self._on_gc

    def start(self) -> None:
        if self._started:
            return
        self.sampler.start()
        self._started = True
        if self.sampler.native:
            _heaphook.set_notify(self.flush, BATCH)
            self._gc_hook = _heaphook.on_gc  # as _on_gc, in C: calls flush
        gc.callbacks.append(self._gc_hook)

    def stop(self) -> None:
        if not self._started:
            return
        if self.sampler.native:
            _heaphook.set_notify(None, 0)
        if self._gc_hook in gc.callbacks:
            gc.callbacks.remove(self._gc_hook)
        self.flush(final=True)
        self.sampler.stop()
        self._started = False

    def abandon(self) -> None:
        """In a forked child: as :meth:`stop` (nothing of the parent's is torn down)."""
        self.stop()

    #: the hooks stay installed; the log and the live objects start afresh in place
    resumes_after_fork = True

    def resume_after_fork(self) -> None:
        """In a forked child going on with this session (issue 22, item 13): the hooks stay
        installed and sampling goes on; what was sampled is the parent's. The C log and
        sampled-address table are forgotten by :mod:`profkit.heap.sampler`'s own after-fork
        hook (whichever of the two runs first, nothing is drained in between); the live
        objects are put aside, not cleared (clearing wrote every entry's page)."""
        self._busy = threading.Lock()  # another thread may have held the parent's at fork
        _put_aside.append(self.live)
        self.live = {}
        self._pid = os.getpid()

    def rearm(self) -> None:
        """``OBJECT_ALLOCATED`` is immutable: nothing to re-read."""

    def _on_gc(self, phase: str, info: dict[str, int]) -> None:
        # After a full collection (gc.collect(), or the interpreter's own, rare, gen-2 one)
        # only, and only when the log holds something: the young collections come every
        # few hundred allocations, and a drain after each (lock, Python objects, delivery)
        # made most of memory mode's cost on small-object churn; between full collections
        # the log is delivered in batches (set_notify) and at detach.
        if phase == "stop" and info["generation"] == 2 and self._has_pending():
            self.flush()

    def _has_pending(self) -> bool:
        return not self.sampler.native or _heaphook.pending() > 0

    def flush(self, final: bool = False) -> None:
        """Deliver the events waiting in the log (never re-entered, never from two threads)."""
        if not (self.ctx.active or final) or not self._busy.acquire(blocking=False):
            return
        native = self.sampler.native
        if native:
            _heaphook.pause()
        try:
            if os.getpid() != self._pid:  # a forked child: the parent's objects are not ours
                self._pid = os.getpid()
                self.live.clear()
            self._deliver(self.sampler.drain())
        except BaseException as exc:
            self.ctx.fail(exc, "delivering allocations")
        finally:
            if native:
                _heaphook.resume()
            self._busy.release()

    def _deliver(self, events: list[Allocation | Free]) -> None:
        ctx = self.ctx
        allocated = ctx.callback("object_allocated")
        freed = ctx.callback("object_freed")
        words_at_free = {e.id: e.type_words for e in events if isinstance(e, Free)}
        self._types.new_batch()
        for event in events:
            if isinstance(event, Allocation):
                words = words_at_free.get(event.id) or event.type_words
                type_name = self._types.name(event.domain, words)
                self.live[event.id] = (event.size, type_name)
                if allocated is not None:
                    ctx.call(
                        "object_allocated",
                        allocated,
                        ObjectId(event.id),
                        type_name,
                        event.size,
                        event.weight,
                        ThreadId(event.thread),
                        self._function_ids(event.stack),
                    )
            elif self.live.pop(event.id, None) is not None and freed is not None:
                ctx.call("object_freed", freed, ObjectId(event.id))

    def _function_ids(self, stack: tuple[tuple[CodeType, int], ...]) -> tuple[FunctionId, ...]:
        """Outermost first; as a sampled stack (frames_to_ids): every function but
        profkit's and the profiler's own."""
        discover, is_own = self.ctx.discover, self.ctx.is_own
        out: list[FunctionId] = []
        for code, _line in reversed(stack):
            fid, accepted = discover(code)
            if accepted or not is_own(code):
                out.append(fid)
        return tuple(out)
