"""Reading real start-up traces of the CoreCLR 3.1 runtime (tests/fixtures/nettrace)."""

from __future__ import annotations

import bisect
import io
from collections import Counter

from profkit.formats.nettrace import (
    EndOfStream,
    Event,
    NettraceParser,
    Trace,
    iter_nettrace,
    load_nettrace,
    read_nettrace,
    sorted_events,
)
from profkit.formats.nettrace import clr_events as ce

from .conftest import RUNTIME_TRACE, SAMPLES_TRACE


def _by_provider(trace: Trace) -> Counter[str]:
    return Counter(trace.metadata[event.metadata_id].provider for event in trace.events)


def test_header_of_a_31_trace(runtime_trace: Trace) -> None:
    header = runtime_trace.header
    assert header.format_version == 4
    assert header.pointer_size == 8
    assert header.qpc_frequency > 0
    assert header.process_id and header.process_id > 0
    assert header.processor_count and header.processor_count >= 1
    assert header.expected_cpu_sampling_rate == 1_000_000  # the 1 ms interval, in ns
    assert header.sync_time_utc.year >= 2020
    first = min(event.timestamp for event in runtime_trace.events)
    assert 0 <= header.seconds(first) < 60


def test_events_by_provider(runtime_trace: Trace) -> None:
    counts = _by_provider(runtime_trace)
    assert counts[ce.SAMPLE_PROFILER] > 0
    assert counts[ce.RUNTIME] > 0
    assert counts[ce.RUNDOWN] > 0
    assert set(counts) <= {
        ce.SAMPLE_PROFILER,
        ce.RUNTIME,
        ce.RUNDOWN,
        "Microsoft-DotNETCore-EventPipe",
    }
    assert runtime_trace.sequence_points, "3.1 writes a sequence point before the end"


def test_every_sample_has_a_stack_and_a_thread(runtime_trace: Trace) -> None:
    samples = [
        event
        for event in runtime_trace.events
        if runtime_trace.metadata[event.metadata_id].provider == ce.SAMPLE_PROFILER
    ]
    assert samples
    for event in samples:
        assert event.stack_id in runtime_trace.stacks
        assert event.thread_id > 0
        assert ce.thread_sample(event.payload) in (ce.SAMPLE_EXTERNAL, ce.SAMPLE_MANAGED)


def _method_names(trace: Trace) -> dict[int, ce.MethodEvent]:
    methods = {}
    for event in trace.events:
        record = ce.decode(trace, event)
        if isinstance(record, ce.MethodEvent):
            methods[record.start] = record
    return methods


def test_stacks_resolve_to_the_programs_methods(runtime_trace: Trace) -> None:
    methods = _method_names(runtime_trace)
    starts = sorted(methods)

    def name(ip: int) -> str | None:
        index = bisect.bisect_right(starts, ip) - 1
        if index < 0:
            return None
        method = methods[starts[index]]
        inside = ip < method.start + method.size
        return f"{method.namespace}.{method.name}" if inside else None

    leaves: Counter[str | None] = Counter()
    for event in runtime_trace.events:
        if runtime_trace.metadata[event.metadata_id].provider != ce.SAMPLE_PROFILER:
            continue
        if ce.thread_sample(event.payload) != ce.SAMPLE_MANAGED:
            continue
        names = [name(ip) for ip in runtime_trace.stack(event)]
        leaves[names[0]] += 1
    assert leaves["NettraceFixture.Burner.Inner"] > 0, leaves


def test_method_names_and_rundown_decoded(runtime_trace: Trace) -> None:
    kinds: Counter[str] = Counter()
    named = set()
    for event in runtime_trace.events:
        record = ce.decode(runtime_trace, event)
        if isinstance(record, ce.MethodEvent):
            kinds[record.kind] += 1
            named.add((record.namespace, record.name))
            assert record.size > 0 and record.start > 0
    assert kinds["load"] > 0 and kinds["dcend"] > 0
    assert ("NettraceFixture.Burner", "Inner") in named
    assert ("NettraceFixture.Program", "Main") in named


def test_other_runtime_events_decoded(runtime_trace: Trace) -> None:
    records = [ce.decode(runtime_trace, event) for event in runtime_trace.events]
    modules = [r for r in records if isinstance(r, ce.ModuleEvent)]
    assert any(m.il_path.endswith("Spinner.dll") for m in modules)
    assert any(m.il_path.endswith("System.Private.CoreLib.dll") for m in modules)
    ticks = [r for r in records if isinstance(r, ce.AllocationTick)]
    assert any(t.type_name == "System.Byte[]" and t.amount > 0 for t in ticks)
    threads = [r for r in records if isinstance(r, ce.ThreadCreated)]
    assert all(t.os_thread_id > 0 for t in threads) and threads
    assert any(isinstance(r, ce.GCStart) for r in records)
    assert any(isinstance(r, ce.GCEnd) for r in records)


def test_names_for_31_metadata_without_names(runtime_trace: Trace) -> None:
    names = {ce.event_name(m) for m in runtime_trace.metadata.values()}
    assert {"ThreadSample", "MethodLoadVerbose", "MethodDCEndVerbose", "GCAllocationTick"} <= names
    process_info = [m for m in runtime_trace.metadata.values() if m.name == "ProcessInfo"]
    assert process_info and process_info[0].fields  # an event whose metadata has fields


def _key(event: Event) -> tuple[object, ...]:
    return tuple(getattr(event, name) for name in Event.__slots__)


def test_incremental_in_small_chunks_equals_whole(
    runtime_bytes: bytes, runtime_trace: Trace
) -> None:
    parser = NettraceParser("live")
    events = []
    records = []
    for start in range(0, len(runtime_bytes), 977):
        got = parser.feed(runtime_bytes[start : start + 977])
        records += got
        events += [r for r in got if isinstance(r, Event)]
    assert parser.finish() is None
    assert isinstance(records[-1], EndOfStream)
    assert [_key(e) for e in events] == [_key(e) for e in runtime_trace.events]
    assert parser.stacks == runtime_trace.stacks
    assert parser.metadata == runtime_trace.metadata


def test_iter_and_load(samples_bytes: bytes) -> None:
    records = list(iter_nettrace(io.BytesIO(samples_bytes), "x", chunk_size=100))
    assert isinstance(records[-1], EndOfStream)
    trace = load_nettrace(str(SAMPLES_TRACE))
    assert len(trace.events) == sum(isinstance(r, Event) for r in records) > 0
    providers = {trace.metadata[e.metadata_id].provider for e in trace.events}
    assert ce.SAMPLE_PROFILER in providers and ce.RUNDOWN not in providers


def test_sorted_events_is_time_order(runtime_trace: Trace) -> None:
    ordered = sorted_events(runtime_trace.events)
    stamps = [event.timestamp for event in ordered]
    assert stamps == sorted(stamps)
    assert len(ordered) == len(runtime_trace.events)


def test_reading_is_repeatable() -> None:
    data = RUNTIME_TRACE.read_bytes()
    one, two = read_nettrace(data, "a"), read_nettrace(memoryview(data), "b")
    assert [_key(e) for e in one.events] == [_key(e) for e in two.events]


def test_iter_yields_before_the_writer_is_done(samples_bytes: bytes) -> None:
    """A live stream: records come out while the writer still holds the rest."""
    import os
    import threading

    read_fd, write_fd = os.pipe()
    got_first = threading.Event()

    def writer() -> None:
        with os.fdopen(write_fd, "wb") as out:
            out.write(samples_bytes[:1200])
            out.flush()
            got_first.wait(60)
            out.write(samples_bytes[1200:])

    thread = threading.Thread(target=writer)
    thread.start()
    records = []
    with os.fdopen(read_fd, "rb") as stream:
        for record in iter_nettrace(stream, "pipe"):
            records.append(record)
            got_first.set()
    thread.join()
    assert isinstance(records[-1], EndOfStream)
    assert sum(isinstance(r, Event) for r in records) == len(
        read_nettrace(samples_bytes, "x").events
    )
