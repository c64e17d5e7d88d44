"""Round trips through the test-only writer: any stream it writes reads back exactly.

Covers V4 (header-compressed or not), V5 metadata (arrays through the V2Params tag,
opcode tags), V6 (blocks, thread and label-list blocks, varint sequence points), 4-
and 8-byte pointers, stacks whose ids restart after every sequence point.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from profkit.errors import FormatError
from profkit.formats.nettrace import Event, EventMetadata, NettraceParser, read_nettrace
from profkit.formats.nettrace.model import FieldDescription, FieldType

from .nettrace_writer import NettraceWriter, RawEvent

TEXT = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=12
)
U32 = st.integers(0, 2**32 - 1)
U64 = st.integers(0, 2**64 - 1)
SIMPLE_CODES = st.sampled_from([3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 16, 17, 18])


def _field_types(arrays: bool) -> st.SearchStrategy[FieldType]:
    leaf = SIMPLE_CODES.map(FieldType)

    def extend(inner: st.SearchStrategy[FieldType]) -> st.SearchStrategy[FieldType]:
        objects = st.lists(st.builds(FieldDescription, TEXT, inner), max_size=3).map(
            lambda fields: FieldType(1, fields=tuple(fields))
        )
        if not arrays:
            return objects
        return objects | inner.map(lambda element: FieldType(19, element=element))

    return st.recursive(leaf, extend, max_leaves=5)


@st.composite
def metadata_lists(draw: st.DrawFn, version: int) -> list[EventMetadata]:
    count = draw(st.integers(1, 4))
    arrays = draw(st.booleans())
    items = []
    for metadata_id in range(1, count + 1):
        fields = draw(
            st.none()
            | st.lists(st.builds(FieldDescription, TEXT, _field_types(arrays)), max_size=3)
        )
        opcode = draw(st.none() | st.integers(0, 255))
        if fields is None and (version >= 6 or opcode is not None):
            fields = []  # V6 always writes a field list, and V5 tags follow one
        items.append(
            EventMetadata(
                metadata_id,
                draw(TEXT),
                draw(st.integers(0, 0xFFFF)),
                draw(TEXT),
                draw(U64),
                draw(st.integers(0, 255)),
                draw(st.integers(0, 255)),
                opcode,
                None if fields is None else tuple(fields),
            )
        )
    return items


@dataclass
class Case:
    data: bytes
    metadata: list[EventMetadata]
    expected: list[tuple[object, ...]]  # per event: the fields a reader must give back


@st.composite
def streams(draw: st.DrawFn) -> Case:
    version = draw(st.sampled_from([4, 6]))
    pointer_size = draw(st.sampled_from([4, 8]))
    writer = NettraceWriter(version, pointer_size, compressed=draw(st.booleans()))
    writer.trace()
    metadata = draw(metadata_lists(version))
    writer.metadata(metadata)
    os_ids = {index: draw(st.integers(1, 2**40)) for index in range(1, 4)}
    if version >= 6:
        writer.threads({index: (os_id, f"t{index}") for index, os_id in os_ids.items()})
    expected = []
    ip = st.integers(0, 2 ** (8 * pointer_size) - 1)
    for _ in range(draw(st.integers(1, 3))):
        stacks = draw(st.lists(st.lists(ip, max_size=5).map(tuple), max_size=4))
        if stacks:
            writer.stacks(1, stacks)
        activities = draw(st.lists(st.binary(min_size=16, max_size=16), max_size=3))
        if version >= 6 and activities:
            writer.label_lists(1, activities)
        rows = []
        for _ in range(draw(st.integers(1, 6))):
            stack = draw(st.integers(0, len(stacks)))
            label = draw(st.integers(0, len(activities))) if version >= 6 else 0
            activity = activities[label - 1] if label else bytes(16)
            if version < 6:
                activity = draw(st.sampled_from([bytes(16), b"\x01" * 16]))
            related = b"\x02" * 16 if version < 6 and draw(st.booleans()) else bytes(16)
            capture, thread = draw(st.integers(1, 3)), draw(st.integers(1, 3))
            row = RawEvent(
                draw(st.integers(1, len(metadata))), draw(U32), capture, thread, draw(U32),
                draw(st.integers(0, 2**62)), stack, draw(st.binary(max_size=24)),
                activity, related, draw(st.booleans()), label,
            )  # fmt: skip
            rows.append(row)
            to_os = (lambda i: os_ids[i]) if version >= 6 else (lambda i: i)
            expected.append(
                (
                    row.metadata_id, row.sequence_number, to_os(capture), to_os(thread),
                    row.processor, row.timestamp, stacks[stack - 1] if stack else (),
                    activity, related, row.is_sorted, row.payload,
                )
            )  # fmt: skip
        writer.events(rows)
        writer.sequence_point(draw(st.integers(0, 2**62)), {1: 0})
    if version >= 6:
        writer.unknown_block(42, b"a block a V6 reader skips")
    return Case(writer.finish(), metadata, expected)


def _got(trace_stacks: dict[int, tuple[int, ...]], event: Event) -> tuple[object, ...]:
    return (
        event.metadata_id, event.sequence_number, event.capture_thread_id, event.thread_id,
        event.processor_number, event.timestamp, trace_stacks.get(event.stack_id, ()),
        event.activity_id, event.related_activity_id, event.is_sorted, bytes(event.payload),
    )  # fmt: skip


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(streams())
def test_round_trip(case: Case) -> None:
    trace = read_nettrace(case.data, "synthetic")
    assert trace.header.process_id == 42
    assert [trace.metadata[m.metadata_id] for m in case.metadata] == case.metadata
    assert [_got(trace.stacks, event) for event in trace.events] == case.expected


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(streams(), st.data())
def test_any_chunking_reads_the_same(case: Case, data: st.DataObject) -> None:
    parser = NettraceParser("live")
    events: list[Event] = []
    pos = 0
    while pos < len(case.data):
        step = data.draw(st.integers(1, 64))
        events += [r for r in parser.feed(case.data[pos : pos + step]) if isinstance(r, Event)]
        pos += step
    assert parser.finish() is None
    assert [_got(parser.stacks, event) for event in events] == case.expected


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(streams(), st.data())
def test_truncated_synthetic_streams_keep_a_prefix(case: Case, data: st.DataObject) -> None:
    cut = data.draw(st.integers(0, len(case.data) - 1))
    parser = NettraceParser("cut")
    records = parser.feed(case.data[:cut])
    truncation = parser.finish()
    assert truncation is not None and truncation.error.kind == "truncated"
    events = [r for r in records if isinstance(r, Event)]
    assert [_got(parser.stacks, e) for e in events] == case.expected[: len(events)]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(streams(), st.data())
def test_mutated_synthetic_streams_fail_only_as_format_errors(
    case: Case, data: st.DataObject
) -> None:
    """Byte flips anywhere in V4 or V6 streams (thread, label-list, V6 metadata blocks too)."""
    mutated = bytearray(case.data)
    for _ in range(data.draw(st.integers(1, 4))):
        mutated[data.draw(st.integers(0, len(mutated) - 1))] = data.draw(st.integers(0, 255))
    try:
        read_nettrace(bytes(mutated), "mutated")
    except FormatError as exc:
        assert exc.path == "mutated" and exc.offset is not None
