"""The memory collector and profile on synthetic events (no runtime): weights, types as
leaf frames, ``--prefix``, GC records, and payloads cut short or flipped (never an
exception: a bad tick is counted and left out)."""

from __future__ import annotations

import random
import struct

from profkit.dotnet.memory import (
    MemoryCollector,
    build_memory_profile,
    heap_stats_total,
)
from profkit.formats.nettrace import Event, EventMetadata
from profkit.formats.nettrace import clr_events as ce

TICK = EventMetadata(1, ce.RUNTIME, 10, "GCAllocationTick", version=3)
START = EventMetadata(2, ce.RUNTIME, 1, "GCStart", version=2)
STATS = EventMetadata(3, ce.RUNTIME, 4, "GCHeapStats", version=1)
SUSPEND = EventMetadata(4, ce.RUNTIME, 9, "GCSuspendEEBegin", version=1)
RESTART = EventMetadata(5, ce.RUNTIME, 3, "GCRestartEEEnd", version=1)
META = {m.metadata_id: m for m in (TICK, START, STATS, SUSPEND, RESTART)}
BIG, SMALL = 0x1000, 0x2000  # code addresses of two methods


def tick_payload(amount: int, type_name: str, kind: int = 0) -> bytes:
    text = type_name.encode("utf-16-le") + b"\0\0"
    head = struct.pack("<IIHQQ", amount & 0xFFFFFFFF, kind, 0, amount, 0x77)
    return head + text + struct.pack("<IQ", 0, 0xABC)


def event(md: EventMetadata, payload: bytes, tid: int = 10, stack: int = 0, ts: int = 0) -> Event:
    return Event(md.metadata_id, 0, tid, tid, 0, ts, stack, b"", b"", True, payload)


def collector() -> MemoryCollector:
    c = MemoryCollector()
    for start, name in ((BIG, "Big"), (SMALL, "Small")):
        c.methods.add(ce.MethodEvent("load", start, 1, start, 0x100, 0, 0, "App.Work", name, ""))
    return c


STACKS = {1: (BIG + 4, 0x9999), 2: (SMALL + 4, 0x9999), 3: (0x9999,)}


def test_ticks_weigh_their_amount_and_the_type_is_the_leaf() -> None:
    c = collector()
    for _ in range(3):
        c.add(event(TICK, tick_payload(300_000, "System.Byte[]"), stack=1), META)
    c.add(event(TICK, tick_payload(300_000, "System.String"), tid=11, stack=2), META)
    c.add(event(TICK, tick_payload(90_000, "System.Byte[]", kind=1), stack=3), META)
    profile = build_memory_profile(c, STACKS, pid=10, prefixes=("App",))
    meta = profile.metadata
    assert profile.mode == "memory" and meta["allocated_bytes"] == 1_290_000
    assert meta["large_object_bytes"] == 90_000 and meta["alloc_samples"] == 5
    names = {f.name for f in profile.frames}
    assert names == {
        "App.Work.Big",
        "App.Work.Small",
        "[type System.Byte[]]",
        "[type System.String]",
    }
    main = profile.threads[0]
    assert main.thread_id == 10 and main.root.inclusive_ns == 990_000
    assert meta["memory_types"][0] == {"type": "System.Byte[]", "samples": 4, "bytes": 990_000}
    assert [t["allocated_bytes"] for t in meta["memory_threads"]] == [990_000, 300_000]


def test_gcs_pauses_and_heap_sizes() -> None:
    c = collector()
    c.add(event(TICK, tick_payload(300, "System.Byte[]"), stack=1, ts=50), META)
    c.add(event(SUSPEND, b"", ts=100), META)
    c.add(event(START, struct.pack("<IIII", 1, 2, 1, 0), ts=110), META)
    stats = struct.pack("<8Q", 10, 0, 20, 0, 30, 0, 40, 0) + bytes(26)
    c.add(event(STATS, stats, ts=150), META)
    c.add(event(RESTART, b"", ts=200), META)
    c.header = None  # QPC ticks taken as nanoseconds
    gc = build_memory_profile(c, {}, pid=1).metadata["gc"]
    assert gc["count"] == 1 and gc["by_generation"] == {"2": 1}
    assert gc["by_reason"] == {"Induced": 1} and gc["pause_ns_total"] == 100
    assert gc["heap_after_gc_max_bytes"] == 100
    assert gc["heap_before_gc_max_bytes"] == 300  # 300 allocated before the first GC
    assert gc["heap_after_full_gc_max_bytes"] == 100  # generation 2: a full GC
    assert gc["collections"] == [
        {
            "number": 1,
            "generation": 2,
            "reason": "Induced",
            "pause_ns": 100,
            "heap_after_bytes": 100,
        }
    ]


def test_heap_stats_short_payload() -> None:
    assert heap_stats_total(STATS, bytes(63)) is None
    assert heap_stats_total(STATS, struct.pack("<8Q", *range(8))) == 0 + 2 + 4 + 6


def test_cut_and_flipped_payloads_never_raise() -> None:
    rng = random.Random(24)
    good = tick_payload(123_456, "System.Collections.Generic.List`1[System.Int32]")
    c = collector()
    for cut in range(len(good)):
        c.add(event(TICK, good[:cut], stack=1), META)
    for _ in range(300):
        data = bytearray(good)
        data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        c.add(event(TICK, bytes(data), stack=1), META)
        c.add(event(START, bytes(data[:16]), stack=1), META)
        c.add(event(STATS, bytes(data), stack=1), META)
    profile = build_memory_profile(c, STACKS, pid=10)
    assert c.bad_ticks > 0
    assert profile.metadata["alloc_samples"] + c.bad_ticks == len(good) + 300
