"""From the native profiler's result to profkit's models: a call profile and a perf map.

The call trees arrive as the writer thread built them: one capture node per
(parent, method id). Two methods can share a display name (overloads: ``Ns.T.M(int)`` and
``Ns.T.M(string)`` are both ``Ns.T.M``), so capture nodes are merged by *frame* under
each parent by :func:`profkit.calltree.building.merge_rows`, the rule every recorder's rows
go through (the Python ones too): self time is derived (inclusive minus the callees'
inclusive), and nodes that never completed a call and have nothing under them are dropped
(hidden below the base time, or still running).
"""

from __future__ import annotations

from typing import Any

from profkit.calltree.building import Row, merge_rows
from profkit.calltree.model import CallNode, CallProfile, Frame, Span, ThreadTree
from profkit.clr.result import ClrResult, Node

#: How many of the process's events (exceptions, GCs, loads, ...) the metadata keeps.
MAX_EVENTS_KEPT = 10_000


def _thread_name(tid: int, name: str, pid: int) -> str:
    if name:
        return name
    return "Main Thread" if tid == pid else f"Thread {tid}"


def _tree(nodes: list[Node], result: ClrResult, profile: CallProfile) -> CallNode:
    rows: list[Row] = []
    for node in nodes:  # creation order: node n is row n, a parent before its children
        name = result.methods.get(node.method, "(events lost)")
        frame = profile.frame_id(Frame(name))
        rows.append((node.parent, frame, node.calls, node.incl, node.min, node.max))
    return merge_rows(rows)


def to_profile(result: ClrResult, metadata: dict[str, Any] | None = None) -> CallProfile:
    """The saved-profile model (``mode == "trace"``) of one .NET process."""
    profile = CallProfile(mode="trace")
    for tid, name in result.threads.items():
        nodes = result.nodes.get(tid, [])
        if not nodes:
            continue
        root = _tree(nodes, result, profile)
        if root.children:
            profile.threads.append(ThreadTree(tid, _thread_name(tid, name, result.pid), root))
    index = {t.thread_id: i for i, t in enumerate(profile.threads)}
    for sp in sorted(result.spans, key=lambda s: (index.get(s.tid, -1), s.start_ns, s.depth)):
        thread = index.get(sp.tid)
        if thread is not None:
            frame = profile.frame_id(Frame(result.methods[sp.method]))
            profile.spans.append(Span(thread, frame, sp.start_ns, sp.end_ns, sp.depth))
    counts: dict[str, int] = {}
    for event in result.events:
        counts[event.kind] = counts.get(event.kind, 0) + 1
    meta: dict[str, Any] = {
        "runtime": "CoreCLR",
        "pid": result.pid,
        "duration_ns": result.duration_ns,
        "profiler_info_version": result.info_version,
        "events_lost": result.lost,
        "stack_resyncs": result.resyncs,
        "records_dropped": result.records_dropped,
        "lines": result.lines,
        "udp": {"datagrams": result.udp_datagrams, "dropped_lines": result.udp_dropped},
        "methods_hooked": len(result.methods),
        "timeline_spans_dropped": result.spans_dropped,
        "clr_event_counts": counts,
        "clr_events": [[e.t_ns, e.tid, e.kind, e.text] for e in result.events[:MAX_EVENTS_KEPT]],
        "modules": [m.path for m in result.modules],
        "code_ranges": {
            "jit": sum(1 for c in result.code if c.kind == "jit"),
            "r2r": sum(1 for c in result.code if c.kind == "r2r"),
        },
    }
    meta.update(metadata or {})
    profile.metadata = meta
    return profile


def perf_map_entries(result: ClrResult) -> list[tuple[int, int, str]]:
    """``(start, size, name)`` for every JIT'd and ReadyToRun code range, by address.

    The runtime's own perf map (``DOTNET_PerfMapEnabled``) lists JIT'd code only; the
    profiler also saw precompiled (R2R) methods as they were found, so those are here too.
    """
    seen: set[tuple[int, int]] = set()
    out: list[tuple[int, int, str]] = []
    for c in sorted(result.code, key=lambda c: (c.start, c.size)):
        if (c.start, c.size) in seen or c.size == 0:
            continue
        seen.add((c.start, c.size))
        out.append((c.start, c.size, c.name if c.kind == "jit" else f"{c.name} [r2r]"))
    return out


def r2r_rvas(result: ClrResult) -> list[tuple[str, int, int, str]]:
    """``(module path, rva, size, name)`` of the precompiled code found in each module.

    For cross-checking an R2R image's method table: a ReadyToRun method's code lies in
    its mapped image, so ``start - module base`` is the code's RVA in that image.
    """
    bases = {m.id: m for m in result.modules}
    out = []
    for c in result.code:
        module = bases.get(c.module)
        if c.kind == "r2r" and module is not None and c.start >= module.base:
            out.append((module.path, c.start - module.base, c.size, c.name))
    return sorted(out)
