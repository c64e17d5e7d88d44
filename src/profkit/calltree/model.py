"""The call-tree model shared by the ELT profiler, reports, exporters and the monitor.

Times are integers in nanoseconds (``*_ns``). A tree is kept per thread; node children
are keyed by frame index so the same function called from different places makes
different nodes (a *call tree*, not a call graph).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Sequence

from profkit._record import field, record

TYPE_CHECKING = False  # typing's, without importing typing at run time (profkit run's start-up)
if TYPE_CHECKING:
    from typing import Any, Generic, Literal, TypeVar

    ProfileMode = Literal["trace", "sample", "memory"]
    K = TypeVar("K", bound=Hashable)
else:
    K = "K"

    class Generic:
        """What ``class Replayed(Generic[K])`` needs of typing.Generic at run time: nothing
        (its base is object)."""

        def __class_getitem__(cls, item: object) -> type:
            return object


@record(frozen=True)
class Frame:
    """A function as reports show it: ``name`` is ``module.qualname``."""

    name: str
    file: str = ""
    line: int = 0


@record
class CallNode:
    """One position in a call tree, aggregated over every call that reached it.

    ``exclusive_ns`` is time spent in the function itself, including the time of callees
    that were hidden (filtered out or below the base time), which is charged to the
    nearest shown caller.
    """

    frame: int  #: index into ``CallProfile.frames``; -1 for a thread's root
    calls: int = 0
    inclusive_ns: int = 0
    exclusive_ns: int = 0
    min_ns: int = 0  #: shortest single call (0 when ``calls == 0``)
    max_ns: int = 0  #: longest single call
    children: dict[int, CallNode] = field(default_factory=dict)

    def child(self, frame: int) -> CallNode:
        """The child for ``frame``, created on first use."""
        node = self.children.get(frame)
        if node is None:
            node = self.children[frame] = CallNode(frame)
        return node

    def add_call(self, duration_ns: int, exclusive_ns: int) -> None:
        """Record one completed call of this node."""
        if self.calls == 0 or duration_ns < self.min_ns:
            self.min_ns = duration_ns
        if duration_ns > self.max_ns:
            self.max_ns = duration_ns
        self.calls += 1
        self.inclusive_ns += duration_ns
        self.exclusive_ns += exclusive_ns

    def __eq__(self, other: object) -> bool:
        """Structural equality, iterative: deep recursion must not overflow the stack."""
        if not isinstance(other, CallNode):
            return NotImplemented
        pending = [(self, other)]
        while pending:
            a, b = pending.pop()
            if (a.frame, a.calls, a.inclusive_ns, a.exclusive_ns, a.min_ns, a.max_ns) != (
                b.frame,
                b.calls,
                b.inclusive_ns,
                b.exclusive_ns,
                b.min_ns,
                b.max_ns,
            ) or a.children.keys() != b.children.keys():
                return False
            pending.extend((child, b.children[key]) for key, child in a.children.items())
        return True

    def walk(self, depth: int = 0) -> Iterator[tuple[int, CallNode]]:
        """Depth-first (depth, node) pairs, children in insertion order."""
        yield depth, self
        for child in self.children.values():
            yield from child.walk(depth + 1)


@record
class ThreadTree:
    """The call tree of one thread; ``root.frame == -1`` and its times are the totals."""

    #: the key the profiler kept the thread by: ``threading.get_ident()`` in trace and memory
    #: mode (kept as metadata: reused after a fork, not an OS id), the OS thread id in
    #: sampled profiles; views show :attr:`label`
    thread_id: int
    name: str
    root: CallNode = field(default_factory=lambda: CallNode(-1))
    #: ``threading.get_native_id()`` when the profiler recorded it (optional in files)
    native_id: int | None = None
    #: the process the thread ran in, when known (set by :func:`~profkit.calltree.file.combine`
    #: from each file's ``metadata["pid"]``; optional in files)
    pid: int | None = None

    @property
    def label(self) -> str:
        """The thread as every view and export names it: ``name (tid N)`` with the OS
        thread id wherever the profile recorded one (every mode does: trace, sample,
        memory, attach; the one ``top -H``, ``perf``, py-spy and debuggers show), so one
        thread reads the same in all of them (issue #25 item 7); ``name (id N)`` with
        Python's ident only in files saved without it; the bare name for a tree that
        stands for several threads (``thread_id`` 0: a memory profile's peak or leaked
        view, which is process-wide)."""
        if self.native_id is not None:
            return f"{self.name} (tid {self.native_id})"
        if self.thread_id == 0:
            return self.name
        return f"{self.name} (id {self.thread_id})"


@record(frozen=True)
class Span:
    """One call on a timeline (for Chrome trace / speedscope evented output)."""

    thread: int  #: index into ``CallProfile.threads``
    frame: int
    start_ns: int  #: relative to the profile start
    end_ns: int
    depth: int


@record
class CallProfile:
    """A whole saved profile: frames, per-thread trees, optional timeline, metadata.

    ``metadata`` holds run facts (argv, pid, python version, start time, duration, the
    settings used, events/datagrams dropped); readers must tolerate unknown keys.
    """

    mode: ProfileMode
    frames: list[Frame] = field(default_factory=list)
    threads: list[ThreadTree] = field(default_factory=list)
    spans: list[Span] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    _frame_index: dict[Frame, int] = field(default_factory=dict, repr=False, compare=False)

    def frame_id(self, frame: Frame) -> int:
        """Intern ``frame`` and return its index."""
        index = self._frame_index.get(frame)
        if index is None:
            if not self._frame_index and self.frames:
                self._frame_index.update((f, i) for i, f in enumerate(self.frames))
                return self.frame_id(frame)
            index = self._frame_index[frame] = len(self.frames)
            self.frames.append(frame)
        return index

    @property
    def total_ns(self) -> int:
        return sum(t.root.inclusive_ns for t in self.threads)


# -- memory profiles: replaying a log of sampled allocations and frees ----------------------
# One algorithm for every memory profile (``profkit.heap.build_profile`` from the raw sampler,
# the memory profiler from the API's notifications): bytes allocated by key; what was alive
# when the live estimate peaked; what is alive at the end. Two passes over the log (the first
# finds the peak, the second replays up to it) rather than snapshots while the program runs:
# the log has one entry per sampling mean allocated, so it is short. It lives in the model
# because profilers may import the model and nothing else of calltree.

#: ``(id, weight, key)`` for an allocation, ``(id, None, None)`` for a free.
LogEntry = tuple[int, float | None, "K | None"]


@record
class Replayed(Generic[K]):
    """What a log says: per key ``[samples, bytes]`` allocated, and the blocks
    (id -> (weight, key)) alive at the peak and at the end."""

    allocated: dict[K, list[float]] = field(default_factory=dict)
    at_peak: dict[int, tuple[float, K]] = field(default_factory=dict)
    leaked: dict[int, tuple[float, K]] = field(default_factory=dict)
    allocated_bytes: float = 0.0
    peak_bytes: float = 0.0


def replay(log: Sequence[LogEntry[K]]) -> Replayed[K]:
    """Replay ``log`` (in the order things happened); a free of an unknown id is ignored."""
    out: Replayed[K] = Replayed()
    live: dict[int, tuple[float, K]] = {}
    live_bytes = 0.0
    peak_at = -1
    for index, (ident, weight, key) in enumerate(log):
        if weight is not None:
            assert key is not None
            row = out.allocated.setdefault(key, [0, 0.0])
            row[0] += 1
            row[1] += weight
            out.allocated_bytes += weight
            live[ident] = (weight, key)
            live_bytes += weight
            if live_bytes > out.peak_bytes:
                out.peak_bytes, peak_at = live_bytes, index
        else:
            gone = live.pop(ident, None)
            if gone is not None:
                live_bytes -= gone[0]
    out.leaked = live
    for ident, weight, key in log[: peak_at + 1]:
        if weight is not None:
            assert key is not None
            out.at_peak[ident] = (weight, key)
        else:
            out.at_peak.pop(ident, None)
    return out
