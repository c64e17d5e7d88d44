"""Sampled allocation events from the running interpreter.

:class:`AllocationSampler` is the mechanism under the heap half of the profiling API: it
installs the C allocator hooks of :mod:`profkit.heap._heaphook` (or, where that module was not
built, a coarser fallback over :mod:`tracemalloc`), and hands out what happened since the last
:meth:`~AllocationSampler.drain` as :class:`Allocation` and :class:`Free` events.

Sampling is by bytes, not by count. An allocation of at least ``mean_bytes`` is always
recorded, with its exact size as its weight: the peak is usually made of a few large blocks,
and it must not depend on sampling luck. The smaller ones are sampled: each thread counts down
an exponentially distributed number of bytes with mean ``mean_bytes`` (large allocations do not
count down); the allocation that crosses zero is sampled. An allocation of ``size`` bytes is
therefore sampled with probability ``p = 1 - exp(-size / mean_bytes)`` and carries
``weight = size / p``: the sum of the weights is an unbiased estimate of the bytes allocated. Python never moves objects, so a sampled block's id stays valid until its
:class:`Free` event (the ``ObjectID`` lifetime rule; ``MovedReferences`` has no analogue).

What is counted: the ``PYMEM_DOMAIN_MEM`` and ``PYMEM_DOMAIN_OBJ`` allocators (every Python
object, and ``PyMem_Malloc`` buffers such as list storage and bytearray contents). Not counted:
``PYMEM_DOMAIN_RAW`` and plain ``malloc`` from extension modules (numpy's array data, for
instance), which run without the GIL where no Python stack can be read safely.
"""

from __future__ import annotations

import os
import threading
from types import CodeType

from profkit._record import record
from profkit.api.strata import Strata, Stratum, StratumKey
from profkit.heap.typenames import TypeNames

TYPE_CHECKING = False  # tracemalloc (with fnmatch, re, linecache, tokenize, pickle) is imported
if TYPE_CHECKING:  # by the fallback only, when it runs: not in memory mode's start-up
    import tracemalloc

_IMPORT_ERROR: str | None = None
try:
    import profkit.heap._heaphook as _heaphook
except ImportError as exc:  # not built here: the tracemalloc fallback
    _IMPORT_ERROR = str(exc)

#: The default mean of the byte-sampling interval (as Go's and tcmalloc's heap profilers).
DEFAULT_MEAN_BYTES = 512 * 1024

#: One frame of an allocation's stack: the code object and the line being executed.
StackFrame = tuple[CodeType, int]


@record(frozen=True)  # not dataclasses: memory mode's start-up (no inspect, ast, dis, re)
class Allocation:
    """A sampled allocation: ``weight`` bytes of the estimate stand behind it."""

    id: int
    size: int
    weight: float
    thread: int
    #: innermost frame first
    stack: tuple[StackFrame, ...]
    #: 1: the object allocator (``PyObject_Malloc``, objects); 0: ``PyMem_Malloc`` buffers
    domain: int = 1
    #: words where the object's type pointer may be (see :class:`TypeNames`); () if unknown
    type_words: tuple[int, ...] = ()


@record(frozen=True)  # not dataclasses: memory mode's start-up (no inspect, ast, dis, re)
class Free:
    """The sampled block ``id`` was freed: its lifetime (and its id) ends here."""

    id: int
    #: the block's type-pointer words just before it was freed
    type_words: tuple[int, ...] = ()


Event = Allocation | Free


def allocation_strata() -> Strata | None:
    """The exact tallies by stratum since the native hooks last started (or were reset
    after fork), with the samples in each; still there after :meth:`AllocationSampler.stop`.
    None without the C hooks (the tracemalloc fallback samples nothing)."""
    if _IMPORT_ERROR is not None:
        return None
    exact, rows = _heaphook.strata()
    return Strata(exact, tuple(Stratum(*row) for row in rows))


__all__ = [
    "DEFAULT_MEAN_BYTES",
    "Allocation",
    "AllocationSampler",
    "Event",
    "Free",
    "StackFrame",
    "Strata",
    "Stratum",
    "StratumKey",
    "TypeNames",
    "allocation_strata",
    "native_available",
]


def native_available() -> bool:
    """Whether the C hooks were built for this interpreter."""
    return _IMPORT_ERROR is None


class AllocationSampler:
    """Start, drain and stop allocation sampling for this process.

    One sampler can run at a time (the allocator is process-wide). ``native=False`` forces the
    tracemalloc fallback, which sees the same allocations but samples nothing: it reports the
    blocks still alive at each :meth:`drain` (as allocations of weight = size), so it can tell
    live and leaked bytes by stack, not the bytes allocated and freed in between.
    """

    def __init__(self, mean_bytes: float = DEFAULT_MEAN_BYTES, *, native: bool = True) -> None:
        if not 1 <= mean_bytes <= 1e15:
            raise ValueError(f"sampling mean must be between 1 byte and 1e15, not {mean_bytes}")
        self.mean_bytes = float(mean_bytes)
        self.native = native and native_available()
        self.dropped = 0
        self._running = False
        self._fallback_ids: dict[tuple[int, tracemalloc.Traceback], list[int]] = {}
        self._fallback_next = 0
        self._lock = threading.Lock()

    @property
    def running(self) -> bool:
        return self._running

    def start(self) -> None:
        """Install the hooks; events are recorded from now on."""
        with self._lock:
            if self._running or _ACTIVE[0] is not None:
                raise RuntimeError("allocation sampling is already running in this process")
            if self.native:
                _heaphook.start(self.mean_bytes)
            else:
                import tracemalloc

                tracemalloc.start(64)
            self._running = True
            _ACTIVE[0] = self

    def stop(self) -> bool:
        """Uninstall the hooks. False when another allocator hook was installed after ours
        and still chains to it: ours then stays in place (harmless) rather than cutting that
        hook off, and keeps recording until the next :meth:`stop`."""
        with self._lock:
            if not self._running:
                return True
            if self.native:
                if not _heaphook.stop():
                    return False
            else:
                import tracemalloc

                tracemalloc.stop()
            self._running = False
            _ACTIVE[0] = None
            return True

    def drain(self) -> list[Event]:
        """The events since the last drain, in the order they happened."""
        if self.native:
            _heaphook.pause()  # the event objects are profkit's allocations, not the program's
            try:
                raw, lost = _heaphook.drain()
                self.dropped += lost
                out: list[Event] = []
                for item in raw:
                    if item[0] == "alloc":
                        _, ident, size, weight, thread, stack, domain, _addr, words = item
                        out.append(Allocation(ident, size, weight, thread, stack, domain, words))
                    else:
                        out.append(Free(item[1], item[2]))
                return out
            finally:
                _heaphook.resume()
        return self._drain_fallback()

    def peak_traced(self) -> int | None:
        """tracemalloc's own peak (fallback only): the native path estimates it from samples."""
        if self.native:
            return None
        import tracemalloc

        if tracemalloc.is_tracing():
            return tracemalloc.get_traced_memory()[1]
        return None

    def _drain_fallback(self) -> list[Event]:
        # tracemalloc's traces have no identity: blocks with the same size and traceback are
        # counted, and a count that grows (shrinks) since the last drain becomes allocations
        # (frees) of synthetic ids.
        import tracemalloc

        if not tracemalloc.is_tracing():
            return []
        snapshot = tracemalloc.take_snapshot()
        counts: dict[tuple[int, tracemalloc.Traceback], int] = {}
        for trace in snapshot.traces:
            key = (trace.size, trace.traceback)
            counts[key] = counts.get(key, 0) + 1
        codes = _CodeFinder()
        events: list[Event] = []
        for key in set(counts) | set(self._fallback_ids):
            ids = self._fallback_ids.setdefault(key, [])
            want = counts.get(key, 0)
            while len(ids) > want:
                events.append(Free(ids.pop()))
            if len(ids) < want:
                size, traceback = key
                stack = tuple(
                    (code, frame.lineno)
                    for frame in reversed(traceback)  # tracemalloc: oldest first
                    if (code := codes.find(frame.filename, frame.lineno)) is not None
                )
                while len(ids) < want:
                    self._fallback_next += 1
                    ids.append(self._fallback_next)
                    events.append(Allocation(self._fallback_next, size, float(size), 0, stack))
            if not ids:
                del self._fallback_ids[key]
        return events


#: The running sampler (the allocator is process-wide, so there is at most one).
_ACTIVE: list[AllocationSampler | None] = [None]


def _after_fork_in_child() -> None:
    # The child's log and sampled-address table describe the parent's heap: it starts afresh
    # (sampling goes on in the child, as the hooks are inherited). The parent's log is left
    # unfreed: freeing it wrote to the page of every code object in it (issue 22, item 13).
    sampler = _ACTIVE[0]
    if sampler is not None and sampler.native:
        _heaphook.reset_after_fork()
        sampler.dropped = 0


os.register_at_fork(after_in_child=_after_fork_in_child)


class _CodeFinder:
    """tracemalloc gives file and line, not code objects: find the innermost code object of
    a module that spans the line, so fallback stacks name functions as native ones do.
    Each file is indexed once (line -> innermost code) on first sight."""

    def __init__(self) -> None:
        self._by_file: dict[str, dict[int, CodeType]] = {}

    def find(self, filename: str, lineno: int) -> CodeType | None:
        index = self._by_file.get(filename)
        if index is None:
            index = self._by_file[filename] = {}
            for code in _codes_of(filename):  # outer before inner: inner lines win
                for _, _, line in code.co_lines():
                    if line is not None:
                        index[line] = code
        return index.get(lineno)


def _codes_of(filename: str) -> list[CodeType]:
    """Every code object compiled from ``filename``'s source, outermost first (none when the
    source cannot be read or compiled: the frame is then left out of the stack)."""
    import tokenize

    try:
        with tokenize.open(filename) as fh:
            top = compile(fh.read(), filename, "exec", dont_inherit=True)
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
        return []
    return _walk(top)


def _walk(code: CodeType) -> list[CodeType]:
    out = [code]
    for const in code.co_consts:
        if isinstance(const, CodeType):
            out.extend(_walk(const))
    return out
