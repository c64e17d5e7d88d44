"""A session's samples as profkit's saved call-tree profile (mode ``sample``).

Each thread keeps its own tree (keyed by its OS thread id, as the CLR trace mode does).
Stacks arrive innermost first as instruction pointers; each is named through the
:class:`~profkit.dotnet.methods.MethodTable` and the tree is built by
:func:`profkit.calltree.building.tree_of`, the one stacks-to-tree rule of the sampled and
memory profiles.

What the 3.1 sample profiler measures: every managed thread, at every tick (1 ms),
whatever it is doing, is a *wall-clock* sample; each says whether the thread was in
managed code or outside it (``external``: native code, a wait, a sleep, a system call).
A thread's external samples end in a ``[external code]`` frame under the managed caller
that left, so waiting is visible and not mistaken for the caller's own work;
``clock="cpu"`` keeps the managed samples only (an approximation of on-CPU time: managed
code is running or runnable; native code that burns CPU is left out) and says so.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from profkit.calltree.building import tree_of
from profkit.calltree.model import CallProfile, Frame, ThreadTree
from profkit.dotnet.collector import Collector
from profkit.dotnet.methods import UNKNOWN
from profkit.errors import UsageError
from profkit.formats.nettrace import clr_events as ce

EXTERNAL = "[external code]"
CLOCKS = ("wall", "cpu")


def check_clock(clock: str, flag: str) -> str:
    """``wall`` or ``cpu``; Python's other sample clocks mean nothing for .NET."""
    if clock not in CLOCKS:
        raise UsageError(
            f"{flag} {clock}: a .NET process is sampled by wall (every sample) or cpu "
            "(managed-code samples only); gil and active are Python's"
        )
    return clock


def thread_label(tid: int, pid: int | None, names: Mapping[int, str]) -> str:
    """The CLR profiler's thread naming: the main thread called so, another thread by the
    kernel's name when it has its own (3.1 passes few thread names on), else
    ``Thread <tid>``."""
    name = names.get(tid, "")
    if pid is not None and name == names.get(pid):
        name = ""  # the process's own name, inherited: says nothing of the thread
    if tid == pid:
        return "Main Thread"
    return name or f"Thread {tid}"


def name_stack(
    ips: tuple[int, ...], name: Callable[[int], str | None], unknown: dict[str, int]
) -> list[str]:
    """Names, outermost first; runs of unnamed addresses fold into one ``[unknown]``."""
    out: list[str] = []
    for ip in reversed(ips):
        n = name(ip)
        if n is None:
            unknown["addresses"] = unknown.get("addresses", 0) + 1
            if out and out[-1] == UNKNOWN:
                continue
            n = UNKNOWN
        out.append(n)
    return out


def prefix_match(name: str, prefixes: tuple[str, ...]) -> bool:
    """The CLR profiler's ``--prefix`` rule: the prefix, then the end, ``.`` or ``+``."""
    for prefix in prefixes:
        if name.startswith(prefix) and name[len(prefix) : len(prefix) + 1] in ("", ".", "+"):
            return True
    return False


def build_profile(
    collector: Collector,
    stacks: Mapping[int, tuple[int, ...]],
    *,
    pid: int | None,
    thread_names: Mapping[int, str] | None = None,
    clock: str = "wall",
    prefixes: tuple[str, ...] = (),
    metadata: dict[str, Any] | None = None,
) -> CallProfile:
    """The profile of what ``collector`` gathered (``stacks``: the stream's stack table).

    ``prefixes`` (``--prefix``) hide the methods outside them, their time charged to the
    nearest shown caller, as the trace mode does; ``[external code]`` stays shown."""
    profile = CallProfile(mode="sample")
    names = thread_names or {}
    frame_of: dict[str, int] = {}
    unknown: dict[str, int] = {}
    cache: dict[tuple[int, int], list[int]] = {}
    lookup = collector.methods.name

    def frames(stack_id: int, kind: int) -> list[int]:
        found = cache.get((stack_id, kind))
        if found is None:
            named = name_stack(stacks.get(stack_id, ()), lookup, unknown)
            if prefixes:
                named = [n for n in named if prefix_match(n, prefixes)]
            if kind == ce.SAMPLE_EXTERNAL:
                named.append(EXTERNAL)
            found = []
            for n in named:
                fid = frame_of.get(n)
                if fid is None:
                    fid = frame_of[n] = profile.frame_id(Frame(n))
                found.append(fid)
            cache[(stack_id, kind)] = found
        return found

    dropped = 0
    for tid, thread in collector.threads.items():
        rows = []
        for (stack_id, kind), (count, weight) in thread.stacks.items():
            if clock == "cpu" and kind != ce.SAMPLE_MANAGED:
                dropped += count
                continue
            rows.append((frames(stack_id, kind), count, weight))
        if not rows:
            continue
        root = tree_of(rows)
        root.exclusive_ns = root.inclusive_ns - sum(c.inclusive_ns for c in root.children.values())
        root.calls = 0
        label = thread_label(tid, pid, names)
        profile.threads.append(ThreadTree(tid, label, root, native_id=tid))
    profile.threads.sort(key=lambda t: (t.thread_id != pid, t.thread_id))
    profile.metadata = _metadata(collector, pid, clock, dropped, unknown.get("addresses", 0))
    profile.metadata.update(metadata or {})
    return profile


def _metadata(
    collector: Collector, pid: int | None, clock: str, dropped: int, unknown: int
) -> dict[str, Any]:
    header = collector.header
    per_thread = {
        str(tid): {"managed": t.managed, "external": t.external}
        for tid, t in sorted(collector.threads.items())
    }
    interval = collector.interval_ns
    return {
        "profiler": "profkit.dotnet (EventPipe sample profiler)",
        "runtime": "CoreCLR",
        "pid": pid,
        "duration_ns": collector.duration_ns(),
        "start_time_ns": int(header.sync_time_utc.timestamp() * 1e9) if header else 0,
        "settings": {"mode": "sample", "sampler_mode": clock, "rate": 1e9 / interval},
        "sampler": {
            "mode": clock,
            "rate": 1e9 / interval,
            "clock": (
                "wall: every managed thread sampled each tick, in managed code or not "
                "(external samples end in '[external code]')"
                if clock == "wall"
                else "cpu (approximate): samples in managed code only; external code "
                "(native, waits, sleeps) left out"
            ),
            "samples": collector.samples,
            "events": collector.events,
            "samples_left_out": dropped,
            "error_samples": collector.bad_samples,
            "threads": per_thread,
            "methods_named": len(collector.methods),
            "unnamed_addresses": unknown,
            "rundown_complete": collector.rundown,
        },
    }
