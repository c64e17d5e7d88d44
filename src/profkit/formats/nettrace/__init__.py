"""EventPipe's nettrace format (CoreCLR 3.0 through .NET 10): bytes in, events out.

Reads V4 and V5 streams (``Nettrace`` + FastSerialization objects: Trace, MetadataBlock,
StackBlock, EventBlock, SPBlock; what CoreCLR 3.x–9 write, and every diagnostics-port
session) and V6 streams (the block format: adds thread, label-list and remove-thread
blocks), header-compressed or not. Format: microsoft/perfview
``src/TraceEvent/EventPipe/NetTraceFormat.md`` (V6) and ``NetTraceFormat_v5.md``
(V4, V5); the writer, dotnet/runtime ``src/native/eventpipe/ep-file.c``, ``ep-block.c``.

API:

- ``read_nettrace(data, name, *, keep_truncated=False) -> Trace``: a whole stream.
  ``load_nettrace(path)`` reads a file through profkit's safe input rules.
- ``NettraceParser(name)``: ``.feed(chunk) -> list[Record]`` as bytes arrive (a live
  diagnostics-port session), ``.finish() -> Truncation | None`` at the end; the parser
  keeps ``header``, ``metadata``, ``stacks``, ``threads``, ``sequence_points``,
  ``lost_events`` as it goes. ``iter_nettrace(binary_file, name)`` yields the same
  records from a file object, a :class:`Truncation` last if the stream was cut.
- ``Trace``: ``header`` (:class:`TraceHeader`: sync time UTC and QPC, QPC frequency,
  pointer size, process id, processor count, expected sampling rate),
  ``metadata: dict[int, EventMetadata]``, ``stacks: dict[int, tuple[int, ...]]``
  (instruction pointers, innermost first), ``events: list[Event]`` (stream order;
  ``sorted_events`` merges by time), ``threads``, ``sequence_points``, ``lost_events``.
- ``Event``: ``metadata_id``, ``sequence_number``, ``capture_thread_id``, ``thread_id``,
  ``processor_number``, ``timestamp`` (QPC ticks), ``stack_id`` (0: none),
  ``activity_id``, ``related_activity_id``, ``is_sorted``, ``payload`` (bytes).
- :mod:`profkit.formats.nettrace.clr_events`: the runtime's events a sampler needs
  (ThreadSample, method and module load/rundown, thread creation, GC, allocation ticks),
  decoded by the manifest's layouts; ``decode_fields(metadata, payload)`` reads any
  payload whose metadata lists its fields (EventSource events, .NET 5+ runtime events).

Damaged input raises :class:`~profkit.errors.FormatError` naming the stream and the byte
offset; a stream cut short is a ``truncated`` error, or, for the incremental parser and
``keep_truncated``, a :class:`Truncation` after everything that came before the cut.
Standard library only.
"""

from __future__ import annotations

from profkit._inputs import read_input
from profkit.formats.nettrace.model import (
    EndOfStream,
    Event,
    EventMetadata,
    FieldDescription,
    FieldType,
    Record,
    SequencePoint,
    Stack,
    ThreadInfo,
    Trace,
    TraceHeader,
    Truncation,
    sorted_events,
)
from profkit.formats.nettrace.parser import NettraceParser, iter_nettrace, read_nettrace
from profkit.formats.nettrace.payload import decode_fields

#: a nettrace file larger than this is refused before it is read whole: a sample costs
#: ~12 bytes of file but ~150 bytes of objects once read, so 1 GiB is already ~80 M
#: events; a larger file is for :func:`iter_nettrace`, which keeps no events
MAX_FILE_BYTES = 1 << 30


def load_nettrace(path: str, *, keep_truncated: bool = False) -> Trace:
    """Read the nettrace file at ``path`` (``-``: stdin)."""
    return read_nettrace(read_input(path, MAX_FILE_BYTES), path, keep_truncated=keep_truncated)


__all__ = [
    "EndOfStream",
    "Event",
    "EventMetadata",
    "FieldDescription",
    "FieldType",
    "NettraceParser",
    "Record",
    "SequencePoint",
    "Stack",
    "ThreadInfo",
    "Trace",
    "TraceHeader",
    "Truncation",
    "decode_fields",
    "iter_nettrace",
    "load_nettrace",
    "read_nettrace",
    "sorted_events",
]
