"""Samples to profile: per-thread trees, weights from the sampler's ticks, external code,
the cpu clock, unnamed addresses (synthetic events: no runtime needed)."""

from __future__ import annotations

import struct
from datetime import UTC, datetime

from profkit.dotnet.collector import MAX_GAP_TICKS, Collector
from profkit.dotnet.profile import EXTERNAL, build_profile, prefix_match
from profkit.formats.nettrace import Event, EventMetadata, TraceHeader
from profkit.formats.nettrace import clr_events as ce

HEADER = TraceHeader(4, 0, datetime(2026, 1, 1, tzinfo=UTC), 0, 10**9, 8, 42, 2, 1_000_000)
META = {
    1: EventMetadata(1, ce.SAMPLE_PROFILER, 0, ""),
    2: EventMetadata(2, ce.RUNDOWN, 144, "", version=1),
}
STACKS = {1: (0x1008, 0x2008), 2: (0x9999, 0x2008), 3: (0x2008,)}  # innermost first


def _event(meta: int, tid: int, ts: int, stack: int, payload: bytes) -> Event:
    return Event(meta, 0, tid, tid, 0, ts, stack, b"", b"", True, payload)


def _sample(tid: int, ts: int, stack: int, kind: int = ce.SAMPLE_MANAGED) -> Event:
    return _event(1, tid, ts, stack, struct.pack("<I", kind))


def _method(start: int, size: int, ns: str, name: str) -> Event:
    text = b"".join((s + "\x00").encode("utf-16-le") for s in (ns, name, "void  ()"))
    payload = struct.pack("<QQQIII", 1, 2, start, size, 0x06000001, 0) + text + b"\x00\x00"
    return _event(2, 7, 0, 0, payload)


def _collector(events: list[Event]) -> Collector:
    c = Collector()
    c.header = HEADER
    c.add_all(events, META)
    return c


def test_threads_kept_apart_and_named_frames() -> None:
    ms = 1_000_000
    events = [
        _method(0x1000, 0x10, "App.Work", "Leaf"),
        _method(0x2000, 0x10, "App.Program", "Main"),
        *(_sample(42, i * ms, 1) for i in range(10)),
        *(_sample(43, i * ms, 3, ce.SAMPLE_EXTERNAL) for i in range(4)),
    ]
    p = build_profile(_collector(events), STACKS, pid=42, thread_names={43: "worker"})
    assert [t.thread_id for t in p.threads] == [42, 43]
    assert [t.name for t in p.threads] == ["Main Thread", "worker"]
    main = p.threads[0].root
    (top,) = main.children.values()
    assert p.frames[top.frame].name == "App.Program.Main"
    (leaf,) = top.children.values()
    assert p.frames[leaf.frame].name == "App.Work.Leaf"
    assert leaf.calls == 10 and leaf.exclusive_ns == 10 * ms  # first sample: one interval
    other = p.threads[1].root
    (top2,) = other.children.values()
    (ext,) = top2.children.values()
    assert p.frames[ext.frame].name == EXTERNAL and ext.calls == 4
    sampler = p.metadata["sampler"]
    assert sampler["threads"] == {
        "42": {"managed": 10, "external": 0},
        "43": {"managed": 0, "external": 4},
    }
    assert sampler["unnamed_addresses"] == 0


def test_late_ticks_weigh_their_gap_and_long_gaps_one_interval() -> None:
    ms = 1_000_000
    times = [0, 1 * ms, 4 * ms, (4 + MAX_GAP_TICKS + 1) * ms]
    c = _collector([_sample(42, t, 3) for t in times])
    (row,) = c.threads[42].stacks.values()
    assert row == [4, ms + ms + 3 * ms + ms]


def test_cpu_clock_leaves_external_samples_out() -> None:
    events = [_sample(42, 0, 3), _sample(42, 1_000_000, 3, ce.SAMPLE_EXTERNAL)]
    p = build_profile(_collector(events), STACKS, pid=42, clock="cpu")
    assert p.threads[0].root.calls == 0 and p.metadata["sampler"]["samples_left_out"] == 1
    assert "managed code only" in p.metadata["sampler"]["clock"]


def test_unnamed_addresses_fold_into_one_frame() -> None:
    events = [_method(0x2000, 0x10, "App.Program", "Main"), _sample(42, 0, 2), _sample(42, 5, 4)]
    stacks = {**STACKS, 4: (0x7777, 0x8888, 0x2008)}
    p = build_profile(_collector(events), stacks, pid=42)
    names = [f.name for f in p.frames]
    assert names.count("[unknown]") == 1
    assert p.metadata["sampler"]["unnamed_addresses"] == 3


def test_error_samples_are_counted_not_kept() -> None:
    c = _collector([_sample(42, 0, 3, ce.SAMPLE_ERROR), _event(1, 42, 1, 3, b"")])
    assert c.samples == 0 and c.bad_samples == 2


def test_prefix_hides_other_methods_charging_their_caller() -> None:
    events = [
        _method(0x1000, 0x10, "System.Linq.Enumerable", "Sum"),
        _method(0x2000, 0x10, "App.Program", "Main"),
        _sample(42, 0, 1),
        _sample(42, 1_000_000, 3, ce.SAMPLE_EXTERNAL),
    ]
    p = build_profile(_collector(events), STACKS, pid=42, prefixes=("App",))
    (main,) = p.threads[0].root.children.values()
    assert p.frames[main.frame].name == "App.Program.Main"
    assert main.exclusive_ns == 1_000_000  # Sum's sample, charged to its shown caller
    assert [p.frames[c.frame].name for c in main.children.values()] == [EXTERNAL]
    assert prefix_match("App.Program.Main", ("App",)) and prefix_match("App+X.M", ("App",))
    assert not prefix_match("Application.M", ("App",))
