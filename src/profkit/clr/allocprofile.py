"""A .NET program's memory profile from the native profiler's allocation records.

The same document Python's memory mode saves (docs/profile-format.md, ``mode: "memory"``):
one tree per allocating thread weighted by the bytes its samples stand for, post-stratified
(:mod:`profkit.clr.allocstrata`: each (type, size class)'s samples scaled to its exact total,
the bytes no sample reached under an ``[unattributed]`` frame), the allocated
type as the leaf frame (``[type System.Byte[]]``, as the EventPipe engine and PerfView show
it), and in the metadata the ``peak`` and ``leaked`` views, ``peak_bytes``,
``leaked_bytes``, per-thread rows, the bytes by type, the GCs seen, and beside profkit's
estimate the runtime's own exact total (``runtime_allocated_bytes``: every object the
runtime reported through ObjectAllocated, by its exact size). ``--prefix`` hides the other
methods and keeps the type leaf.
"""

from __future__ import annotations

from typing import Any

from profkit.calltree.building import tree_of
from profkit.calltree.model import CallProfile, Frame, ThreadTree
from profkit.clr.allocrecords import AllocResult, AllocSite
from profkit.clr.allocstrata import Stratified, poststratify
from profkit.clr.result import ClrResult

#: types listed in ``memory_types`` (the biggest by bytes); GCs listed one by one
MAX_TYPES = 100
MAX_GCS = 500
#: the frame under a thread's root holding the bytes of strata no sample reached
UNATTRIBUTED = "[unattributed]"
#: the native cap on a thread's strata (csrc/alloc.h ALLOC_MAX_STRATA)
STRATA_CAP = 4096


def _prefix_match(name: str, prefixes: tuple[str, ...]) -> bool:
    """The CLR profiler's ``--prefix`` rule: the prefix, then the end, ``.`` or ``+``."""
    return any(name.startswith(p) and name[len(p) : len(p) + 1] in ("", ".", "+") for p in prefixes)


def _thread_label(tid: int, result: ClrResult) -> str:
    if tid == result.pid:
        return "Main Thread"
    return result.threads.get(tid) or f"Thread {tid}"


class _Frames:
    """Frame ids of the profile, by name, and each site's shown stack."""

    def __init__(self, profile: CallProfile, alloc: AllocResult, prefixes: tuple[str, ...]):
        self.profile, self.alloc, self.prefixes = profile, alloc, prefixes
        self.ids: dict[str, int] = {}

    def fid(self, name: str) -> int:
        found = self.ids.get(name)
        if found is None:
            found = self.ids[name] = self.profile.frame_id(Frame(name))
        return found

    def stack(self, site: AllocSite) -> tuple[int, ...]:
        names = [self.alloc.frames[i] if i >= 0 else "[unknown]" for i in site.frames]
        if self.prefixes:
            names = [n for n in names if _prefix_match(n, self.prefixes)]
        names.append(f"[type {self.type_name(site)}]")
        return tuple(self.fid(n) for n in names)

    def type_name(self, site: AllocSite) -> str:
        return self.kind_name(site.type)

    def kind_name(self, kind: int) -> str:
        """A type index's name (-1: unnamed, -2: the strata beyond the native cap)."""
        if kind == -2:
            return "[other strata]"
        return self.alloc.types[kind] if 0 <= kind < len(self.alloc.types) else "?"


def gc_metadata(result: ClrResult) -> dict[str, Any]:
    """The GCs the profiler saw (``gc-start``/``gc-end`` events): generation, reason, the
    time from start to end (the GC's work, profkit's callbacks in it) and the pause: the
    runtime's suspension for it (``suspend`` 1 or 7) to the resumption after it."""
    gcs: list[dict[str, Any]] = []
    by_generation: dict[str, int] = {}
    sums = {"duration": [0, 0], "pause": [0, 0]}  # total, longest
    current: dict[str, Any] | None = None  # the GC being followed (kept or not)
    suspended = started = -1
    count = 0
    for event in result.events:
        if event.kind == "suspend":
            suspended = event.t_ns if event.text in ("1", "7") else -1
        elif event.kind == "gc-start":
            parts = event.text.split()
            generation = parts[0] if parts else "?"
            by_generation[generation] = by_generation.get(generation, 0) + 1
            current = {"generation": generation, "reason": parts[1] if len(parts) > 1 else ""}
            current["t_ns"], started, count = event.t_ns, event.t_ns, count + 1
            if len(gcs) < MAX_GCS:
                gcs.append(current)
        elif event.kind == "gc-end" and current is not None and started >= 0:
            _add(sums["duration"], current, "duration_ns", event.t_ns - started)
            started = -1
        elif event.kind == "resume" and current is not None and 0 <= suspended <= current["t_ns"]:
            _add(sums["pause"], current, "pause_ns", event.t_ns - suspended)
            suspended, current = -1, None
    return {
        "count": count,
        "by_generation": by_generation,
        "duration_ns_total": sums["duration"][0],
        "duration_ns_max": sums["duration"][1],
        "pause_ns_total": sums["pause"][0],
        "pause_ns_max": sums["pause"][1],
        "collections": gcs,
        "collections_kept": MAX_GCS,
    }


def _add(sums: list[int], gc: dict[str, Any], key: str, value: int) -> None:
    value = max(value, 0)
    gc[key] = value
    sums[0] += value
    sums[1] = max(sums[1], value)


def to_memory_profile(
    result: ClrResult, metadata: dict[str, Any] | None = None, prefixes: tuple[str, ...] = ()
) -> CallProfile:
    """The memory profile of one .NET process (its result must hold allocation records)."""
    alloc = result.alloc or AllocResult()
    profile = CallProfile(mode="memory")
    frames = _Frames(profile, alloc, prefixes)
    strata = poststratify(alloc)
    by_thread: dict[int, list[tuple[tuple[int, ...], int, int]]] = {}
    peak: dict[tuple[int, ...], list[int]] = {}
    leaked: dict[tuple[int, ...], list[int]] = {}
    types: dict[str, list[int]] = {}  # name -> [samples, bytes, objects]
    for site, weight in zip(alloc.sites, strata.weights, strict=True):
        stack = frames.stack(site)
        by_thread.setdefault(site.tid, []).append((stack, site.samples, weight))
        # the live views keep the samples' own weights: the strata count allocations, not lives
        for view, live in ((peak, site.at_peak), (leaked, site.leaked)):
            if live:
                row = view.setdefault(stack, [0, 0])
                row[0] += max(1, round(site.samples * live / site.bytes))  # its share
                row[1] += live
        row = types.setdefault(frames.type_name(site), [0, 0, 0])
        row[0] += site.samples
        row[1] += weight
    for (tid, kind), (_objects, size) in strata.unattributed.items():
        name = frames.kind_name(kind)
        stack = (frames.fid(UNATTRIBUTED), frames.fid(f"[type {name}]"))
        by_thread.setdefault(tid, []).append((stack, 0, size))
    if alloc.strata:  # exact by type: every stratum, sampled or not
        types = {name: [row[0], 0, 0] for name, row in types.items()}
        for kind, (objects, size) in strata.by_type.items():
            row = types.setdefault(frames.kind_name(kind), [0, 0, 0])
            row[1] += size
            row[2] += objects
    for tid in sorted(by_thread, key=lambda t: (t != result.pid, t)):
        root = tree_of(by_thread[tid])
        profile.threads.append(ThreadTree(tid, _thread_label(tid, result), root, native_id=tid))
    ranked = sorted(types.items(), key=lambda kv: -kv[1][1])[:MAX_TYPES]
    profile.metadata = _metadata(result, alloc, by_thread, ranked)
    profile.metadata.update(_strata_metadata(result, alloc, strata, by_thread))
    profile.metadata["memory_views"] = {
        "peak": [[list(s), n, w] for s, (n, w) in peak.items()],
        "leaked": [[list(s), n, w] for s, (n, w) in leaked.items()],
    }
    profile.metadata.update(metadata or {})
    return profile


def _metadata(
    result: ClrResult,
    alloc: AllocResult,
    by_thread: dict[int, list[tuple[tuple[int, ...], int, int]]],
    ranked: list[tuple[str, list[int]]],
) -> dict[str, Any]:
    """What the memory profile says beside its trees (docs/clr.md lists it)."""
    estimate = sum(w for rows in by_thread.values() for _s, _n, w in rows)
    return {
        "profiler": "libprofkit_clr (ObjectAllocated, sampled by bytes, post-stratified)",
        "runtime": "CoreCLR",
        "pid": result.pid,
        "duration_ns": result.duration_ns,
        "profiler_info_version": result.info_version,
        "metric": "alloc_bytes",
        "unit": "bytes",
        "alloc_sample_bytes": alloc.mean,
        "exact_from_bytes": alloc.mean,
        "sampling": "every object the runtime allocates passes ObjectAllocated with its exact "
        "size, counted exactly in its stratum (type, power-of-two size class); sampled by "
        "bytes (exponential countdown of mean alloc_sample_bytes, weight "
        "size / (1 - exp(-size/mean)); objects of at least the mean always, weight = size), "
        "then each stratum's sample weights scaled to its exact total; the stack is a "
        "snapshot of the allocating thread, the type the leaf frame",
        "alloc_samples": alloc.samples,
        "allocated_bytes": estimate,
        "runtime_allocated_bytes": alloc.bytes,
        "runtime_allocated_objects": alloc.objects,
        "peak_bytes": alloc.peak_bytes,
        "peak_definition": "the most sampled bytes alive at a GC's end (or at the end, after "
        "a last GC profkit forces at Shutdown): exact for the generations that GC collected; "
        "an older object that died unseen counts until a GC of its generation",
        "leaked_bytes": sum(s.leaked for s in alloc.sites),
        "followed_cap": 1 << 20,
        "untracked_samples": alloc.untracked,
        "stack_failures": alloc.stack_failures,
        "followed": {"moved_by_gc": alloc.moved, "died": alloc.died, "gcs": alloc.gcs},
        "memory_types": [
            {"type": t, "samples": c, "bytes": b, **({"objects": n} if alloc.strata else {})}
            for t, (c, b, n) in ranked
        ],
        "gc": gc_metadata(result),
        "concurrent_gc": "off (COR_PRF_MONITOR_GC, needed to follow objects, turns it off)",
    }


def _strata_metadata(
    result: ClrResult,
    alloc: AllocResult,
    strata: Stratified,
    by_thread: dict[int, list[tuple[tuple[int, ...], int, int]]],
) -> dict[str, Any]:
    """The estimator, the strata, and the per-thread rows (allocated: the thread's tree)."""
    unattributed = [0, 0]
    for objects, size in strata.unattributed.values():
        unattributed[0] += objects
        unattributed[1] += size
    own = {t.tid: t for t in alloc.threads}
    rows = []
    for tid in sorted(set(own) | set(strata.by_thread)):
        t = own.get(tid)
        row: dict[str, Any] = {
            "thread": tid,
            "name": _thread_label(tid, result),
            "allocated_bytes": sum(w for _s, _n, w in by_thread.get(tid, ())),
            "peak_bytes": t.peak if t else 0,
            "at_process_peak_bytes": t.at_peak if t else 0,
            "leaked_bytes": t.leaked if t else 0,
        }
        if alloc.strata:
            row["runtime_allocated_bytes"] = strata.by_thread.get(tid, 0)
        rows.append(row)
    return {
        "alloc_estimator": strata.estimator,
        # the key Python's memory mode uses (docs/profile-format.md); the rows by type are
        # memory_types' (a program's strata can be thousands)
        "alloc_strata": {
            "method": strata.estimator,
            "exact_bytes": sum(size for _objects, size in strata.by_type.values()),
            "strata": strata.strata,
            "unsampled": strata.unsampled,
            "cap_per_thread": STRATA_CAP,
            "other_bytes": strata.by_type.get(-2, [0, 0])[1],
        }
        if alloc.strata
        else None,
        "unattributed_bytes": unattributed[1],
        "unattributed_objects": unattributed[0],
        "memory_threads": rows,
    }
