"""The runtime-event decoders on hand-built payloads of every version they read."""

from __future__ import annotations

import struct

import pytest

from profkit.formats.nettrace import EventMetadata
from profkit.formats.nettrace import clr_events as ce


def _meta(provider: str, event_id: int, version: int = 0, name: str = "") -> EventMetadata:
    return EventMetadata(1, provider, event_id, name, version=version)


def _text(value: str) -> bytes:
    return value.encode("utf-16-le") + b"\x00\x00"


METHOD_HEAD = struct.pack("<QQQIII", 11, 22, 0x7F00_0000_1000, 0x40, 0x0600_0001, 0)
NAMES = _text("NS.Type") + _text("Work") + _text("void  (int32)")


def test_method_verbose_v0_v1_v2() -> None:
    v0 = ce.method_event(_meta(ce.RUNTIME, 143, 0), METHOD_HEAD + NAMES, 8)
    assert v0 is not None and (v0.kind, v0.namespace, v0.name) == ("load", "NS.Type", "Work")
    assert (v0.method_id, v0.module_id, v0.start, v0.size) == (11, 22, 0x7F00_0000_1000, 0x40)
    v1 = ce.method_event(_meta(ce.RUNDOWN, 144, 1), METHOD_HEAD + NAMES + b"\x00\x00", 8)
    assert v1 is not None and v1.kind == "dcend" and v1.signature == "void  (int32)"
    payload = METHOD_HEAD + NAMES + struct.pack("<HQ", 0, 7)
    v2 = ce.method_event(_meta(ce.RUNTIME, 144, 2), payload, 8)
    assert v2 is not None and v2.kind == "unload" and v2.rejit_id == 7


def test_method_without_names_and_rundown_start() -> None:
    plain = ce.method_event(_meta(ce.RUNTIME, 141, 1), METHOD_HEAD + b"\x00\x00", 8)
    assert plain is not None and plain.name == "" and plain.size == 0x40
    start = ce.method_event(_meta(ce.RUNDOWN, 143, 1), METHOD_HEAD + NAMES, 8)
    assert start is not None and start.kind == "dcstart"


@pytest.mark.parametrize("cut", [0, 10, len(METHOD_HEAD), len(METHOD_HEAD) + 5])
def test_short_method_payloads_are_not_decoded(cut: int) -> None:
    assert ce.method_event(_meta(ce.RUNTIME, 143, 1), (METHOD_HEAD + NAMES)[:cut], 8) is None


def test_module_events() -> None:
    payload = struct.pack("<QQII", 5, 6, 8, 0) + _text("/x/a.dll") + _text("") + b"\x00\x00"
    load = ce.module_event(_meta(ce.RUNTIME, 152, 2), payload, 8)
    assert load == ce.ModuleEvent("load", 5, 6, 8, "/x/a.dll", "")
    end = ce.module_event(_meta(ce.RUNDOWN, 154, 2), payload, 8)
    assert end is not None and end.kind == "dcend"
    assert ce.module_event(_meta(ce.RUNTIME, 152, 2), payload[:20], 8) is None


@pytest.mark.parametrize("pointer_size", [4, 8])
def test_thread_created(pointer_size: int) -> None:
    fmt = "<QQIIIH" if pointer_size == 8 else "<IIIIIH"
    payload = struct.pack(fmt, 0xAA, 0xBB, 4, 3, 12345, 0)
    record = ce.thread_created(_meta(ce.RUNTIME, 85), payload, pointer_size)
    assert record == ce.ThreadCreated(0xAA, 0xBB, 4, 3, 12345)
    assert ce.thread_created(_meta(ce.RUNTIME, 85), payload[:9], pointer_size) is None


def test_gc_start_end() -> None:
    start = ce.gc_start(_meta(ce.RUNTIME, 1, 2), struct.pack("<IIIIHQ", 3, 1, 4, 0, 0, 9))
    assert start == ce.GCStart(3, 1, 4, 0)
    assert ce.gc_end(_meta(ce.RUNTIME, 2, 1), struct.pack("<IIH", 3, 1, 0)) == ce.GCEnd(3, 1)
    assert ce.gc_end(_meta(ce.RUNTIME, 2, 1), b"\x00") is None
    assert ce.gc_start(_meta(ce.RUNTIME, 2, 1), b"") is None  # not a GCStart
    assert ce.gc_start(_meta(ce.RUNTIME, 1, 0), struct.pack("<II", 3, 4)) == ce.GCStart(3, 0, 4, 0)
    assert ce.gc_end(_meta(ce.RUNTIME, 2, 0), struct.pack("<IH", 3, 2)) == ce.GCEnd(3, 2)


def test_allocation_tick_versions() -> None:
    meta = {v: _meta(ce.RUNTIME, 10, v) for v in range(5)}
    assert ce.allocation_tick(meta[1], struct.pack("<IIH", 100, 1, 0), 8) == ce.AllocationTick(
        100, 1
    )
    v2 = struct.pack("<IIHQQ", 100, 0, 0, 2**33, 0x55) + _text("T[]") + struct.pack("<I", 2)
    tick = ce.allocation_tick(meta[2], v2, 8)
    assert tick == ce.AllocationTick(2**33, 0, 0x55, "T[]", 2)
    v4 = v2 + struct.pack("<QQ", 0x1000, 48)
    tick = ce.allocation_tick(meta[4], v4, 8)
    assert tick is not None and (tick.address, tick.object_size) == (0x1000, 48)
    assert ce.allocation_tick(meta[4], v2, 8) is None  # a V4 payload cut to V2's length


def test_thread_sample_and_names() -> None:
    assert ce.thread_sample(struct.pack("<I", ce.SAMPLE_MANAGED)) == ce.SAMPLE_MANAGED
    assert ce.thread_sample(b"\x01") is None
    assert ce.event_name(_meta(ce.SAMPLE_PROFILER, 0)) == "ThreadSample"
    assert ce.event_name(_meta(ce.RUNTIME, 999)) == "EventID(999)"
    assert ce.event_name(_meta(ce.RUNTIME, 1, name="GCStart_V2")) == "GCStart_V2"


def test_decoders_ignore_other_events() -> None:
    other = _meta("My-Provider", 143)
    assert ce.method_event(other, METHOD_HEAD + NAMES, 8) is None
    assert ce.module_event(other, b"", 8) is None
    assert ce.allocation_tick(other, b"", 8) is None
