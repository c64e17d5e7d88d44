"""What an EventPipe session (or a nettrace file) says, gathered as it is read.

The sample profiler's ``ThreadSample`` events become per-thread counts by (stack, kind):
one dict update per event, so a long session costs memory by its distinct stacks, not its
samples. Each sample weighs the time since that thread's previous sample (the sampler
visits every thread at each tick; a tick late on a busy machine covers more time), capped
at :data:`MAX_GAP_TICKS` intervals so a thread unseen for a while (suspended, created late)
does not take the whole gap. Method and module events fill the :class:`MethodTable`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from profkit._record import field, record
from profkit.dotnet.methods import MethodTable
from profkit.formats.nettrace import Event, EventMetadata, TraceHeader
from profkit.formats.nettrace import clr_events as ce

#: a gap longer than this many sampling intervals is charged one interval. Gaps of 100-800
#: ms are real on a loaded machine (20 spinning threads on 2 cores: median 7.7 ms, 90th
#: percentile 176 ms, max 812 ms; the sampler waits for every thread to reach a safe
#: point): wall time the thread spent, so they are charged whole up to one second
MAX_GAP_TICKS = 1000
#: the 3.1 sampler's interval when the stream does not say (1 ms)
DEFAULT_INTERVAL_NS = 1_000_000


@record
class ThreadSamples:
    """One thread's samples: by (stack id, kind) -> [samples, weight in ns]."""

    tid: int
    stacks: dict[tuple[int, int], list[int]] = field(default_factory=dict)
    managed: int = 0
    external: int = 0
    first: tuple[int, int] | None = None  #: (stack id, kind) of its first sample
    last_ts: int = -1
    first_ts: int = -1


class Collector:
    """Takes events in stream order; holds what a profile, ``top`` and ``dump`` need."""

    def __init__(self) -> None:
        self.header: TraceHeader | None = None
        self.threads: dict[int, ThreadSamples] = {}
        self.methods = MethodTable()
        self.modules: dict[int, ce.ModuleEvent] = {}
        self.events = 0
        self.samples = 0
        self.bad_samples = 0
        self.first_ts = -1
        self.last_ts = -1
        self.rundown = False  #: the rundown's end (DCEndComplete) was seen

    @property
    def interval_ns(self) -> int:
        rate = self.header.expected_cpu_sampling_rate if self.header else None
        return rate if rate and 0 < rate < 10**9 else DEFAULT_INTERVAL_NS

    def _ticks(self, ts: int) -> int:
        """A QPC delta in nanoseconds."""
        freq = self.header.qpc_frequency if self.header else 10**9
        return ts * 1_000_000_000 // freq if freq != 10**9 else ts

    def add(self, event: Event, metadata: Mapping[int, EventMetadata]) -> None:
        """One event (its metadata already read: the parser checked the id)."""
        self.events += 1
        md = metadata[event.metadata_id]
        ts = event.timestamp
        if self.first_ts < 0:
            self.first_ts = ts
        self.last_ts = max(self.last_ts, ts)
        if md.provider == ce.SAMPLE_PROFILER:
            self._sample(event, ts)
            return
        pointer = self.header.pointer_size if self.header else 8
        method = ce.method_event(md, event.payload, pointer)
        if method is not None:
            if method.kind != "unload":
                self.methods.add(method)
            return
        module = ce.module_event(md, event.payload, pointer)
        if module is not None:
            self.modules[module.module_id] = module
        elif (md.provider, md.event_id) == (ce.RUNDOWN, 146):
            self.rundown = True

    def _sample(self, event: Event, ts: int) -> None:
        kind = ce.thread_sample(event.payload)
        if kind not in (ce.SAMPLE_MANAGED, ce.SAMPLE_EXTERNAL):
            self.bad_samples += 1
            return
        tid = event.thread_id
        thread = self.threads.get(tid)
        if thread is None:
            thread = self.threads[tid] = ThreadSamples(tid)
            thread.first_ts = ts
        interval = self.interval_ns
        if thread.last_ts < 0:
            weight = interval
        else:
            gap = self._ticks(ts - thread.last_ts)
            weight = gap if 0 < gap <= MAX_GAP_TICKS * interval else interval
        thread.last_ts = max(thread.last_ts, ts)
        key = (event.stack_id, kind)
        row = thread.stacks.get(key)
        if row is None:
            row = thread.stacks[key] = [0, 0]
            if thread.first is None:
                thread.first = key
        row[0] += 1
        row[1] += weight
        if kind == ce.SAMPLE_MANAGED:
            thread.managed += 1
        else:
            thread.external += 1
        self.samples += 1

    def add_all(self, events: Iterable[Event], metadata: Mapping[int, EventMetadata]) -> None:
        for event in events:
            self.add(event, metadata)

    def duration_ns(self) -> int:
        if self.first_ts < 0:
            return 0
        return self._ticks(self.last_ts - self.first_ts)
