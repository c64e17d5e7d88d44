"""The nettrace model, shared by every format version (V4 and V5 FastSerialization
streams, V6 block streams): the trace header, event metadata, stacks, threads, events,
sequence points, and the :class:`Trace` that holds them all.

Ids in the model are trace-wide. The runtime restarts stack ids at every sequence point
(ep-file.c resets its stack hash there) and a V6 writer may flush metadata and thread
indexes; the parser renumbers so that ``Trace.stacks[event.stack_id]`` and
``Trace.metadata[event.metadata_id]`` always mean what the event referred to.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from profkit.errors import FormatError

#: field type codes of EventPipe metadata (NetTraceFormat.md, "TypeCode")
TYPE_OBJECT = 1
TYPE_ARRAY = 19
TYPE_FIXED_ARRAY = 22


@dataclass(frozen=True, slots=True)
class TraceHeader:
    """What the stream says of the whole trace (the Trace object, or V6's TraceBlock).

    ``expected_cpu_sampling_rate`` is written as is: CoreCLR's V4 writer puts the sample
    profiler's interval there, in nanoseconds (1000000 = one sample a millisecond).
    """

    format_version: int  #: 4 for FastSerialization streams (V4 and V5), else the major
    minor_version: int
    sync_time_utc: datetime
    sync_time_qpc: int
    qpc_frequency: int
    pointer_size: int
    process_id: int | None
    processor_count: int | None
    expected_cpu_sampling_rate: int | None
    key_values: Mapping[str, str] = field(default_factory=dict)

    def seconds(self, timestamp: int) -> float:
        """A QPC timestamp as seconds since the trace's sync time."""
        return (timestamp - self.sync_time_qpc) / self.qpc_frequency


@dataclass(frozen=True, slots=True)
class FieldType:
    """A payload field's type: a code, and what arrays and objects are made of."""

    code: int
    element: FieldType | None = None  #: arrays (19, 22) and RelLoc/DataLoc (24, 25)
    fields: tuple[FieldDescription, ...] = ()  #: objects (1)
    count: int = 0  #: fixed-length arrays (22)


@dataclass(frozen=True, slots=True)
class FieldDescription:
    """One named payload field of an event type."""

    name: str
    type: FieldType


@dataclass(frozen=True, slots=True)
class EventMetadata:
    """One event type: provider, id, name and, where the writer gave them, its fields.

    ``fields`` is ``None`` when the metadata carries no field list at all and ``()``
    when it says "no fields"; CoreCLR 3.1 writes its own runtime events with no field
    list, so their payloads are read by known layouts (:mod:`.clr_events`).
    """

    metadata_id: int
    provider: str
    event_id: int
    name: str
    keywords: int = 0
    version: int = 0
    level: int = 0
    opcode: int | None = None
    fields: tuple[FieldDescription, ...] | None = None
    message_template: str | None = None
    provider_guid: bytes | None = None


@dataclass(frozen=True, slots=True)
class Stack:
    """A stack first seen in the stream: instruction pointers, innermost first."""

    stack_id: int
    ips: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ThreadInfo:
    """A V6 thread row: the index events refer to, and what it says of the thread."""

    index: int
    name: str | None = None
    process_id: int | None = None
    thread_id: int | None = None
    key_values: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SequencePoint:
    """A checkpoint: a timestamp, and per capture thread the last sequence number logged."""

    timestamp: int
    threads: Mapping[int, int]
    flags: int = 0
    offset: int = 0  #: where the block starts in the stream


@dataclass(frozen=True, slots=True)
class EndOfStream:
    """The stream's own end marker was read: nothing was cut."""

    offset: int


@dataclass(frozen=True, slots=True)
class Truncation:
    """The stream stopped inside an object (the writer died, or the file was cut).

    Everything before ``offset`` was read and returned; ``error`` is what a reader that
    wants a whole stream raises.
    """

    offset: int
    error: FormatError


class Event:
    """One event. ``thread_id`` is the thread the event describes, ``capture_thread_id``
    the one that logged it (OS thread ids; a V6 thread index when the stream never
    named the thread). ``stack_id`` is a key of ``Trace.stacks`` (0: no stack);
    ``payload`` is the event's bytes, laid out as its metadata says."""

    __slots__ = (
        "activity_id",
        "capture_thread_id",
        "is_sorted",
        "metadata_id",
        "payload",
        "processor_number",
        "related_activity_id",
        "sequence_number",
        "stack_id",
        "thread_id",
        "timestamp",
    )

    def __init__(
        self,
        metadata_id: int,
        sequence_number: int,
        capture_thread_id: int,
        thread_id: int,
        processor_number: int,
        timestamp: int,
        stack_id: int,
        activity_id: bytes,
        related_activity_id: bytes,
        is_sorted: bool,
        payload: bytes,
    ) -> None:
        self.metadata_id = metadata_id
        self.sequence_number = sequence_number
        self.capture_thread_id = capture_thread_id
        self.thread_id = thread_id
        self.processor_number = processor_number
        self.timestamp = timestamp
        self.stack_id = stack_id
        self.activity_id = activity_id
        self.related_activity_id = related_activity_id
        self.is_sorted = is_sorted
        self.payload = payload

    def __repr__(self) -> str:
        return (
            f"Event(metadata_id={self.metadata_id}, thread_id={self.thread_id}, "
            f"timestamp={self.timestamp}, stack_id={self.stack_id}, "
            f"payload={bytes(self.payload)!r})"
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Event):
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name) for name in Event.__slots__)

    __hash__ = None  # type: ignore[assignment]


#: what :meth:`NettraceParser.feed` returns, in stream order
Record = TraceHeader | EventMetadata | Stack | ThreadInfo | Event | SequencePoint | EndOfStream


@dataclass(slots=True)
class Trace:
    """A whole nettrace stream, read.

    ``events`` are in stream order: the runtime sorts them per capture thread only
    (:func:`sorted_events` merges them by time). ``lost_events`` counts the sequence
    numbers the stream skipped (events the runtime dropped); ``truncation`` is set only
    by readers asked to keep what came before a cut.
    """

    name: str
    header: TraceHeader
    metadata: dict[int, EventMetadata]
    stacks: dict[int, tuple[int, ...]]
    events: list[Event]
    threads: dict[int, ThreadInfo] = field(default_factory=dict)
    sequence_points: list[SequencePoint] = field(default_factory=list)
    lost_events: int = 0
    truncation: Truncation | None = None

    def event_metadata(self, event: Event) -> EventMetadata:
        """The metadata ``event`` refers to (the parser checked it exists)."""
        return self.metadata[event.metadata_id]

    def stack(self, event: Event) -> tuple[int, ...]:
        """The instruction pointers of ``event``'s stack, innermost first (``()``: none)."""
        return self.stacks.get(event.stack_id, ())


def sorted_events(events: list[Event]) -> list[Event]:
    """``events`` in time order (stable: equal timestamps keep their stream order)."""
    return sorted(events, key=lambda event: event.timestamp)
