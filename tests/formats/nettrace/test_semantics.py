"""What the reader infers beyond bytes: lost events, id renumbering, caches and flushes."""

from __future__ import annotations

import pytest

from profkit.errors import FormatError
from profkit.formats.nettrace import EventMetadata, read_nettrace

from .nettrace_writer import NettraceWriter, RawEvent


def _event(metadata_id: int, seq: int, thread: int = 1, stack: int = 0, stamp: int = 0) -> RawEvent:
    return RawEvent(metadata_id, seq, thread, thread, 0, stamp, stack, b"")


META = EventMetadata(1, "P", 7, "E", fields=())


@pytest.mark.parametrize("version", [4, 6])
def test_lost_events_from_gaps_and_sequence_points(version: int) -> None:
    writer = NettraceWriter(version)
    writer.trace()
    writer.metadata([META])
    if version >= 6:
        writer.threads({1: (501, "a"), 2: (502, "b")})
    writer.events([_event(1, 1), _event(1, 2), _event(1, 5), _event(1, 1, thread=2)])
    writer.sequence_point(10, {1: 8, 2: 1})  # thread 1 tried 3 more, thread 2 none
    trace = read_nettrace(writer.finish(), "x")
    assert trace.lost_events == 2 + 3
    point = trace.sequence_points[0]
    assert dict(point.threads) == ({501: 8, 502: 1} if version >= 6 else {1: 8, 2: 1})


@pytest.mark.parametrize("version", [4, 6])
def test_stack_ids_restart_after_a_sequence_point(version: int) -> None:
    writer = NettraceWriter(version)
    writer.trace()
    writer.metadata([META])
    writer.stacks(1, [(0x10, 0x20), (0x30,)])
    writer.events([_event(1, 1, stack=1), _event(1, 2, stack=2)])
    writer.sequence_point(5, {})
    writer.stacks(1, [(0x30,), (0x40,)])  # id 1 now means another stack
    writer.events([_event(1, 3, stack=1), _event(1, 4, stack=2)])
    trace = read_nettrace(writer.finish(), "x")
    assert [trace.stack(e) for e in trace.events] == [(0x10, 0x20), (0x30,), (0x30,), (0x40,)]
    assert len(trace.stacks) == 3  # (0x30,) kept one id across the sequence point
    assert trace.events[1].stack_id == trace.events[2].stack_id


@pytest.mark.parametrize("version", [4, 6])
def test_a_stack_id_from_before_the_sequence_point_is_an_error(version: int) -> None:
    writer = NettraceWriter(version)
    writer.trace()
    writer.metadata([META])
    writer.stacks(1, [(0x10,)])
    writer.sequence_point(5, {})
    writer.events([_event(1, 1, stack=1)])
    with pytest.raises(FormatError, match="undefined stack id 1"):
        read_nettrace(writer.finish(), "x")


def test_undefined_metadata_is_an_error() -> None:
    writer = NettraceWriter(4)
    writer.trace()
    writer.events([_event(3, 1)])
    with pytest.raises(FormatError, match="undefined metadata id 3") as caught:
        read_nettrace(writer.finish(), "x.nettrace")
    assert caught.value.offset is not None and caught.value.path == "x.nettrace"


def test_v6_metadata_flush_and_redefinition_keep_ids_apart() -> None:
    writer = NettraceWriter(6)
    writer.trace()
    writer.threads({1: (501, "main")})
    writer.metadata([META])
    writer.events([_event(1, 1)])
    writer.sequence_point(5, {}, flags=2)  # the writer may reuse metadata id 1 from here
    other = EventMetadata(1, "Q", 9, "F", fields=())
    writer.metadata([other])
    writer.events([_event(1, 2)])
    trace = read_nettrace(writer.finish(), "x")
    first, second = (trace.metadata[e.metadata_id] for e in trace.events)
    assert (first.provider, first.event_id) == ("P", 7)
    assert (second.provider, second.event_id) == ("Q", 9)
    assert trace.events[0].metadata_id != trace.events[1].metadata_id
    assert trace.events[0].thread_id == trace.events[1].thread_id == 501


def test_v6_metadata_flush_forgets_old_ids() -> None:
    writer = NettraceWriter(6)
    writer.trace()
    writer.metadata([META])
    writer.sequence_point(5, {}, flags=2)
    writer.events([_event(1, 1)])
    with pytest.raises(FormatError, match="undefined metadata id 1"):
        read_nettrace(writer.finish(), "x")


def test_v6_thread_flush_forgets_thread_names() -> None:
    writer = NettraceWriter(6)
    writer.trace()
    writer.metadata([META])
    writer.threads({1: (501, "main")})
    writer.events([_event(1, 1)])
    writer.sequence_point(5, {1: 1}, flags=1)
    writer.events([_event(1, 2)])  # index 1 no longer names a thread: kept as the index
    trace = read_nettrace(writer.finish(), "x")
    assert [e.thread_id for e in trace.events] == [501, 1]
    assert trace.threads[1].name == "main" and trace.threads[1].thread_id == 501


def test_v6_header_key_values() -> None:
    writer = NettraceWriter(6)
    writer.trace(pid=77, cpus=3)
    trace = read_nettrace(writer.finish(), "x")
    assert trace.header.format_version == 6
    assert (trace.header.process_id, trace.header.processor_count) == (77, 3)
    assert trace.header.key_values["ProcessId"] == "77"
    assert trace.header.expected_cpu_sampling_rate is None
