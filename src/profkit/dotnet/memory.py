"""A .NET program's allocations from the runtime's own events: memory mode over EventPipe.

CoreCLR raises ``GCAllocationTick`` each time a GC heap's allocations (small and large
objects counted apart) pass about 100 KB since its previous tick, on the thread that
allocated, with that thread's stack and the type of the object whose allocation crossed
the mark; ``AllocationAmount`` (64-bit from V2) is the bytes since that heap's previous
tick. Weighting each tick by that amount makes the trees an estimate of the bytes
allocated by stack: a stack's chance of being the one that crosses grows with the bytes it
allocates, so the sum over many ticks converges on its share (the same sampling-by-bytes
rule as the Python sampler, with the runtime's fixed ~100 KB mean instead of
``--alloc-sample``). What it cannot see: the bytes after each heap's last tick (less than
100 KB per heap and kind), and everything allocated before the session started.

The type is the crossing object's, so it is a sample of types by bytes too; it becomes the
stack's leaf frame (``[type System.Byte[]]``, as PerfView's allocation views show it) so a
tree, a flame graph or pprof shows *what* each method allocates, and ``memory_types`` in the
metadata sums the bytes by type.

The GC's own events (``GCStart``/``GCEnd`` with generation and reason, the suspension's
pause, ``GCHeapStats`` after each GC) go into ``metadata["gc"]``. What is alive at the peak
and at the end, by stack, would need each sampled object followed across GCs (the
Profiling API's ``MovedReferences``); the events do not say it, so this profile has no
``peak``/``leaked`` views and says so in ``not_available`` (``--metric peak`` is then a
one-line usage error); the heap's size after each GC is there as a lower bound of the peak.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any

from profkit.calltree.building import tree_of
from profkit.calltree.model import CallProfile, Frame, ThreadTree
from profkit.dotnet.collector import Collector
from profkit.dotnet.ipc import Provider
from profkit.dotnet.profile import name_stack, prefix_match, thread_label
from profkit.formats.nettrace import Event, EventMetadata
from profkit.formats.nettrace import clr_events as ce

#: Microsoft-Windows-DotNETRuntime: GC (0x1) with method and module loads for the names
MEMORY_KEYWORDS = 0x1 | 0x8 | 0x10 | 0x20 | 0x10000
#: GCAllocationTick is a verbose (level 5) event
PROVIDERS = (Provider(ce.RUNTIME, MEMORY_KEYWORDS, 5),)
#: the runtime's tick: bytes per heap and object kind between two GCAllocationTick events
TICK_BYTES = 100 * 1024
#: GCs kept one by one in the metadata (the totals count them all)
MAX_GCS = 500
#: types listed in ``memory_types`` (the biggest by bytes)
MAX_TYPES = 100
REASONS = (
    "AllocSmall", "Induced", "LowMemory", "Empty", "AllocLarge", "OutOfSpaceSOH",
    "OutOfSpaceLOH", "InducedNotForced", "Internal", "InducedLowMemory", "InducedCompacting",
    "LowMemoryHost", "PMFullGC", "LowMemoryHostBlocking",
)  # fmt: skip
NOT_AVAILABLE = {
    "peak": "the GC's events do not say which sampled objects are alive at a moment "
    "(that needs the Profiling API's MovedReferences); the heap's size bounds the peak of "
    "live bytes: gc.heap_after_full_gc_max_bytes (just after a generation-2 GC: live "
    "bytes then) from below, gc.heap_before_gc_max_bytes (the heap after a GC plus the "
    "bytes allocated until the next, garbage included) from above",
    "leaked": "the same: gc.heap_after_last_gc_bytes is the heap just after the last GC seen",
}
_GC_START, _GC_END, _HEAP_STATS, _TICK, _RESTART_END, _SUSPEND_BEGIN = 1, 2, 4, 10, 3, 9


def heap_stats_total(metadata: EventMetadata, payload: bytes) -> int | None:
    """GCHeapStats (V1: generations 0-3; V2: also the pinned heap): the bytes in the
    generations after the GC, or ``None`` if the payload is short."""
    gens = 5 if metadata.version >= 2 else 4
    if len(payload) < 16 * gens:
        return None
    values = struct.unpack_from(f"<{2 * gens}Q", payload)
    return sum(values[0::2])


class MemoryCollector(Collector):
    """Adds the allocation ticks (by thread, stack and type) and the GCs to a collector."""

    def __init__(self) -> None:
        super().__init__()
        #: tid -> (stack id, type name) -> [ticks, bytes]
        self.allocs: dict[int, dict[tuple[int, str], list[int]]] = {}
        self.ticks = 0
        self.bad_ticks = 0
        self.bytes_by_kind = [0, 0]  # small, large
        self.gcs: list[dict[str, Any]] = []
        self.gc_count = 0
        self.by_generation: dict[int, int] = {}
        self.by_reason: dict[str, int] = {}
        self.pause_ns = 0
        self.max_pause_ns = 0
        self.heap_max = 0
        self.heap_last = -1
        self.since_gc = 0  #: estimated bytes allocated since the last GC started
        self.heap_before_max = 0
        self.full_after_max = -1  #: the heap after a generation-2 GC, at its highest
        self._suspended = -1
        self._open: dict[str, Any] | None = None

    def add(self, event: Event, metadata: Mapping[int, EventMetadata]) -> None:
        md = metadata[event.metadata_id]
        if md.provider != ce.RUNTIME or md.event_id not in (1, 2, 3, 4, 9, 10):
            super().add(event, metadata)
            return
        self.events += 1
        ts = event.timestamp
        if self.first_ts < 0:
            self.first_ts = ts
        self.last_ts = max(self.last_ts, ts)
        if md.event_id == _TICK:
            self._tick(event, md)
        else:
            self._gc(event, md, ts)

    def _tick(self, event: Event, md: EventMetadata) -> None:
        pointer = self.header.pointer_size if self.header else 8
        tick = ce.allocation_tick(md, event.payload, pointer)
        if tick is None or tick.amount <= 0:
            self.bad_ticks += 1
            return
        rows = self.allocs.setdefault(event.thread_id, {})
        key = (event.stack_id, tick.type_name)
        row = rows.get(key)
        if row is None:
            row = rows[key] = [0, 0]
        row[0] += 1
        row[1] += tick.amount
        self.bytes_by_kind[1 if tick.kind == 1 else 0] += tick.amount
        self.since_gc += tick.amount
        self.ticks += 1

    def _gc(self, event: Event, md: EventMetadata, ts: int) -> None:
        kind = md.event_id
        if kind == _SUSPEND_BEGIN:
            self._suspended = ts
        elif kind == _RESTART_END and self._suspended >= 0:
            pause = self._ticks(ts - self._suspended)
            self._suspended = -1
            self.pause_ns += pause
            self.max_pause_ns = max(self.max_pause_ns, pause)
            if self._open is not None:
                self._open["pause_ns"] += pause
        elif kind == _GC_START:
            start = ce.gc_start(md, event.payload)
            if start is None:
                return
            self.gc_count += 1
            self.heap_before_max = max(self.heap_before_max, self._heap_now())
            self.since_gc = 0
            reason = REASONS[start.reason] if start.reason < len(REASONS) else str(start.reason)
            self.by_generation[start.depth] = self.by_generation.get(start.depth, 0) + 1
            self.by_reason[reason] = self.by_reason.get(reason, 0) + 1
            self._open = {"number": start.count, "generation": start.depth, "reason": reason}
            self._open.update(pause_ns=0, heap_after_bytes=None)
            if len(self.gcs) < MAX_GCS:
                self.gcs.append(self._open)
        elif kind == _HEAP_STATS:
            total = heap_stats_total(md, event.payload)
            if total is not None:
                self.heap_max = max(self.heap_max, total)
                self.heap_last = total
                if self._open is not None:
                    self._open["heap_after_bytes"] = total
                    if self._open["generation"] >= 2:
                        self.full_after_max = max(self.full_after_max, total)

    def _heap_now(self) -> int:
        """The heap after the last GC plus what was allocated since (garbage included)."""
        return max(self.heap_last, 0) + self.since_gc

    def gc_metadata(self) -> dict[str, Any]:
        return {
            "count": self.gc_count,
            "by_generation": {str(g): n for g, n in sorted(self.by_generation.items())},
            "by_reason": dict(sorted(self.by_reason.items())),
            "pause_ns_total": self.pause_ns,
            "pause_ns_max": self.max_pause_ns,
            "heap_after_gc_max_bytes": self.heap_max if self.heap_last >= 0 else None,
            "heap_after_last_gc_bytes": self.heap_last if self.heap_last >= 0 else None,
            "heap_before_gc_max_bytes": max(self.heap_before_max, self._heap_now()),
            "heap_after_full_gc_max_bytes": (
                self.full_after_max if self.full_after_max >= 0 else None
            ),
            "collections": self.gcs,
            "collections_kept": MAX_GCS,
        }


def build_memory_profile(
    collector: MemoryCollector,
    stacks: Mapping[int, tuple[int, ...]],
    *,
    pid: int | None,
    thread_names: Mapping[int, str] | None = None,
    prefixes: tuple[str, ...] = (),
    metadata: dict[str, Any] | None = None,
) -> CallProfile:
    """The memory profile (docs/profile-format.md, mode ``memory``) of the ticks seen.

    ``prefixes`` hide the methods outside them as in sample mode; the type leaf stays."""
    profile = CallProfile(mode="memory")
    names = thread_names or {}
    frame_of: dict[str, int] = {}
    unknown: dict[str, int] = {}
    lookup = collector.methods.name

    def fid(name: str) -> int:
        found = frame_of.get(name)
        if found is None:
            found = frame_of[name] = profile.frame_id(Frame(name))
        return found

    types: dict[str, list[int]] = {}
    per_thread = []
    for tid, rows_in in collector.allocs.items():
        rows = []
        for (stack_id, type_name), (count, weight) in rows_in.items():
            named = name_stack(stacks.get(stack_id, ()), lookup, unknown)
            if prefixes:
                named = [n for n in named if prefix_match(n, prefixes)]
            shown = type_name or "?"
            named.append(f"[type {shown}]")
            rows.append(([fid(n) for n in named], count, weight))
            row = types.setdefault(shown, [0, 0])
            row[0] += count
            row[1] += weight
        root = tree_of(rows)
        root.exclusive_ns = root.inclusive_ns - sum(c.inclusive_ns for c in root.children.values())
        root.calls = 0
        label = thread_label(tid, pid, names)
        profile.threads.append(ThreadTree(tid, label, root, native_id=tid))
        per_thread.append(
            {
                "thread": tid,
                "name": label,
                "allocated_bytes": root.inclusive_ns,
                "samples": sum(r[1] for r in rows),
            }
        )
    profile.threads.sort(key=lambda t: (t.thread_id != pid, t.thread_id))
    ranked = sorted(types.items(), key=lambda kv: -kv[1][1])[:MAX_TYPES]
    profile.metadata = _metadata(collector, pid, per_thread, ranked, unknown.get("addresses", 0))
    profile.metadata.update(metadata or {})
    return profile


def _metadata(
    collector: MemoryCollector,
    pid: int | None,
    per_thread: list[dict[str, Any]],
    ranked: list[tuple[str, list[int]]],
    unknown: int,
) -> dict[str, Any]:
    """What the memory profile says beside its trees (docs/clr.md lists it)."""
    total = sum(collector.bytes_by_kind)
    header = collector.header
    return {
        "profiler": "profkit.dotnet (EventPipe GCAllocationTick)",
        "runtime": "CoreCLR",
        "pid": pid,
        "duration_ns": collector.duration_ns(),
        "start_time_ns": int(header.sync_time_utc.timestamp() * 1e9) if header else 0,
        "metric": "alloc_bytes",
        "unit": "bytes",
        "alloc_sample_bytes": TICK_BYTES,
        "sampling": "the runtime's GCAllocationTick: one per ~100 KB allocated per GC heap "
        "and object kind, weighted by the bytes since the heap's previous tick "
        "(AllocationAmount); the type is the crossing object's, shown as the leaf frame",
        "alloc_samples": collector.ticks,
        "allocated_bytes": total,
        "small_object_bytes": collector.bytes_by_kind[0],
        "large_object_bytes": collector.bytes_by_kind[1],
        "bad_ticks": collector.bad_ticks,
        "memory_threads": sorted(per_thread, key=lambda r: r["thread"]),
        "memory_types": [{"type": t, "samples": c, "bytes": b} for t, (c, b) in ranked],
        "gc": collector.gc_metadata(),
        "not_available": dict(NOT_AVAILABLE),
        "unnamed_addresses": unknown,
        "methods_named": len(collector.methods),
        "rundown_complete": collector.rundown,
        "events": collector.events,
    }
