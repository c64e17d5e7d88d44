"""Reading a nettrace stream, all at once (:func:`read_nettrace`) or as it arrives
(:class:`NettraceParser`): framing, then each block turned into model records.

The parser keeps what later blocks refer to: metadata by id, stacks (interned by their
bytes, so a stack the runtime writes again after a sequence point keeps one id), V6
threads and label lists. Events come out in stream order, their ids already trace-wide.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from typing import BinaryIO

from profkit.errors import FormatError
from profkit.formats.nettrace import blocks, framing
from profkit.formats.nettrace._primitives import Where
from profkit.formats.nettrace.events import iter_rows, metadata_block_v6_body
from profkit.formats.nettrace.metadata import read_metadata_v4, read_metadata_v6
from profkit.formats.nettrace.model import (
    EndOfStream,
    Event,
    EventMetadata,
    Record,
    SequencePoint,
    Stack,
    ThreadInfo,
    Trace,
    TraceHeader,
    Truncation,
)

_U32 = 1 << 32
_NO_ID = bytes(16)


class NettraceParser:
    """An incremental nettrace reader: ``feed`` bytes as they come, get records back.

    ``feed`` returns every record completed by the bytes so far (a block is decoded once
    it is whole). A damaged block raises :class:`FormatError`, but only after the records
    of the blocks before it were returned: the next ``feed`` or :meth:`finish` raises.
    :meth:`finish` says whether the stream ended properly (``None``) or was cut
    (a :class:`Truncation` naming the offset; everything before it was returned).
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.header: TraceHeader | None = None
        self.metadata: dict[int, EventMetadata] = {}
        self.stacks: dict[int, tuple[int, ...]] = {}
        self.threads: dict[int, ThreadInfo] = {}
        self.sequence_points: list[SequencePoint] = []
        self.lost_events = 0
        self.ended = False
        self.truncation: Truncation | None = None
        self._stream: framing.StreamHeader | None = None
        self._buffer = bytearray()
        self._base = 0  # stream offset of _buffer[0]
        self._error: FormatError | None = None
        self._metadata_ids: dict[int, int] = {}
        self._stack_by_bytes: dict[bytes, int] = {}
        self._region_stacks: dict[int, int] = {}
        self._labels: dict[int, tuple[bytes, bytes]] = {}
        self._os_thread: dict[int, int] = {}
        self._last_seq: dict[int, int] = {}

    @property
    def offset(self) -> int:
        """How many bytes of the stream were consumed (whole frames)."""
        return self._base

    def feed(self, chunk: bytes | bytearray | memoryview) -> list[Record]:
        """Take the next bytes of the stream; return the records they completed."""
        if self._error is not None:
            raise self._error
        if self.ended:
            if len(chunk):
                raise FormatError(
                    "malformed",
                    "bytes after the end of the stream",
                    path=self.name,
                    offset=self._base,
                )
            return []
        self._buffer += chunk
        records: list[Record] = []
        used = self._consume(self._buffer, self._base, records)
        del self._buffer[:used]
        self._base += used
        return records

    def finish(self) -> Truncation | None:
        """The stream is over: ``None`` if it ended properly, else where it was cut."""
        if self._error is not None:
            raise self._error
        if self.ended:
            return None
        pending = len(self._buffer)
        if self._stream is None:
            detail = f"stream ends inside its header ({pending} bytes)"
        elif pending:
            detail = f"stream ends inside an object ({pending} bytes of it present)"
        else:
            detail = "stream ends without its end-of-stream mark"
        error = FormatError("truncated", detail, path=self.name, offset=self._base)
        self.truncation = Truncation(self._base, error)
        return self.truncation

    def _consume(self, data: bytes | bytearray, base: int, records: list[Record]) -> int:
        """Decode every whole frame of ``data`` (stream offset ``base``); bytes used."""
        where = Where(self.name, base)
        pos = 0
        try:
            if self._stream is None:
                self._stream = framing.read_stream_header(data, where)
                if self._stream is None:
                    return 0
                pos = self._stream.size
            v6 = self._stream.format_version >= 6
            next_frame = framing.next_block if v6 else framing.next_object
            while not self.ended:
                frame = next_frame(data, pos, where)
                if frame is None:
                    break
                block = bytes(data[frame.start : frame.end])
                self._frame(frame.kind, block, Where(self.name, base + frame.start), records)
                pos = frame.next
            if self.ended and pos < len(data):
                raise where.error("malformed", "bytes after the end of the stream", pos)
        except FormatError as exc:
            if not records:
                raise
            self._error = exc
        return pos

    def _frame(self, kind: int, block: bytes, where: Where, records: list[Record]) -> None:
        v6 = self._stream is not None and self._stream.format_version >= 6
        if kind == framing.TRACE:
            if self.header is not None:
                raise where.error("malformed", "a second trace header", 0)
            self.header = self._read_header(block, where)
            records.append(self.header)
            return
        if kind == framing.END:
            self.ended = True
            records.append(EndOfStream(where.base))
            return
        if self.header is None:
            raise where.error("malformed", f"block of kind {kind} before the trace header", 0)
        if kind == framing.EVENT:
            self._events(block, where, v6, records)
        elif kind == framing.METADATA:
            self._metadata(block, where, v6, records)
        elif kind == framing.STACK:
            self._stacks(block, where, records)
        elif kind == framing.SEQUENCE_POINT:
            self._sequence_point(block, where, v6, records)
        elif kind == framing.THREAD:
            for info in blocks.read_threads(block, where):
                self.threads[info.index] = info
                if info.thread_id is not None:
                    self._os_thread[info.index] = info.thread_id
                records.append(info)
        elif kind == framing.REMOVE_THREAD:
            for index, seq in blocks.read_removed_threads(block, where):
                self._checkpoint(self._os_thread.get(index, index), seq)
        elif kind == framing.LABEL_LIST:
            first, lists = blocks.read_label_lists(block, where)
            for number, ids in enumerate(lists):
                self._labels[first + number] = ids
        # V6 readers skip kinds they do not know (NetTraceFormat.md, "Blocks")

    def _read_header(self, block: bytes, where: Where) -> TraceHeader:
        stream = self._stream
        assert stream is not None
        if stream.format_version >= 6:
            return blocks.read_trace_block(
                block, where, stream.format_version, stream.minor_version
            )
        return blocks.read_trace_object(block, where)

    def _metadata(self, block: bytes, where: Where, v6: bool, records: list[Record]) -> None:
        if v6:
            pos = metadata_block_v6_body(block, where)
            while pos < len(block):
                metadata, pos = read_metadata_v6(block, pos, len(block), where)
                records.append(self._define(metadata))
            return
        for row in iter_rows(block, where, False):
            records.append(self._define(read_metadata_v4(block, row[11], row[12], where)))

    def _define(self, metadata: EventMetadata) -> EventMetadata:
        """Register metadata under a trace-wide id (its own, unless that id is taken)."""
        local = metadata.metadata_id
        known = self.metadata.get(local)
        if known is not None and known != metadata:
            taken = max(self.metadata) + 1
            metadata = dataclasses.replace(metadata, metadata_id=max(taken, _U32))
        self._metadata_ids[local] = metadata.metadata_id
        self.metadata[metadata.metadata_id] = metadata
        return metadata

    def _stacks(self, block: bytes, where: Where, records: list[Record]) -> None:
        assert self.header is not None
        size = self.header.pointer_size
        first, raws = blocks.read_stacks(block, where, size)
        for number, raw in enumerate(raws):
            stack_id = self._stack_by_bytes.get(raw)
            if stack_id is None:
                stack_id = len(self._stack_by_bytes) + 1
                self._stack_by_bytes[raw] = stack_id
                ips = blocks.decode_ips(raw, size)
                self.stacks[stack_id] = ips
                records.append(Stack(stack_id, ips))
            self._region_stacks[(first + number) & (_U32 - 1)] = stack_id

    def _sequence_point(self, block: bytes, where: Where, v6: bool, records: list[Record]) -> None:
        if v6:
            point = blocks.read_sequence_point_v6(block, where, where.base)
            threads = {self._os_thread.get(k, k): seq for k, seq in point.threads.items()}
            point = dataclasses.replace(point, threads=threads)
        else:
            point = blocks.read_sequence_point_v4(block, where, where.base)
        for thread, seq in point.threads.items():
            self._checkpoint(thread, seq)
        self._region_stacks.clear()  # stack ids restart after every sequence point
        self._labels.clear()
        if point.flags & 1:
            self._os_thread.clear()
        if point.flags & 2:
            self._metadata_ids.clear()
        self.sequence_points.append(point)
        records.append(point)

    def _checkpoint(self, thread: int, seq: int) -> None:
        """A sequence point's lower bound: sequence numbers never seen were dropped."""
        last = self._last_seq.get(thread, 0)
        gap = (seq - last) % _U32
        if 0 < gap < _U32 // 2:
            self.lost_events += gap
            self._last_seq[thread] = seq

    def _events(self, block: bytes, where: Where, v6: bool, records: list[Record]) -> None:
        metadata_ids = self._metadata_ids
        stacks = self._region_stacks
        last_seq = self._last_seq
        os_thread = self._os_thread
        append = records.append
        for row in iter_rows(block, where, v6):
            meta, seq, capture, thread, proc, stack, stamp, act, rel, label, ordered, at, stop = row
            metadata_id = metadata_ids.get(meta)
            if metadata_id is None:
                raise where.error("malformed", f"event of undefined metadata id {meta}", at)
            stack_id = stacks.get(stack, 0) if stack else 0
            if stack and not stack_id:
                raise where.error("malformed", f"event of undefined stack id {stack}", at)
            if v6:
                capture = os_thread.get(capture, capture)
                thread = os_thread.get(thread, thread)
                if label:
                    act, rel = self._labels.get(label, (_NO_ID, _NO_ID))
            if seq != last_seq.get(capture, 0) + 1:  # a gap: events the runtime dropped
                gap = (seq - last_seq.get(capture, 0) - 1) % _U32
                if gap < _U32 // 2:
                    self.lost_events += gap
            last_seq[capture] = seq
            append(
                Event(
                    metadata_id, seq, capture, thread, proc, stamp, stack_id, act, rel, ordered,
                    block[at:stop],
                )
            )  # fmt: skip

    def trace(self, events: list[Event]) -> Trace:
        """A :class:`Trace` of what was read so far, with ``events`` as its events."""
        if self.header is None:
            raise FormatError(
                "truncated", "no trace header was read", path=self.name, offset=self._base
            )
        return Trace(
            self.name,
            self.header,
            self.metadata,
            self.stacks,
            events,
            self.threads,
            self.sequence_points,
            self.lost_events,
            self.truncation,
        )


def read_nettrace(data: bytes | memoryview, name: str, *, keep_truncated: bool = False) -> Trace:
    """Read a whole nettrace stream.

    A stream cut short raises :class:`FormatError` (``truncated``) unless
    ``keep_truncated``: then the trace holds everything before the cut and says where
    in ``Trace.truncation``.
    """
    parser = NettraceParser(name)
    records: list[Record] = []
    whole = data if isinstance(data, bytes) else bytes(data)
    used = parser._consume(whole, 0, records)
    if parser._error is not None:
        raise parser._error
    parser._base = used
    parser._buffer = bytearray(whole[used:]) if used < len(whole) else bytearray()
    truncation = parser.finish()
    if truncation is not None and not keep_truncated:
        raise truncation.error
    return parser.trace([record for record in records if isinstance(record, Event)])


def iter_nettrace(
    stream: BinaryIO, name: str, chunk_size: int = 1 << 16
) -> Iterator[Record | Truncation]:
    """Records of a binary stream (a file, a pipe, ``socket.makefile("rb")``) as its
    bytes arrive: ``read1`` is used where the stream has it, so a live session's records
    come out as soon as a block is whole, not when ``chunk_size`` bytes have gathered.

    Ends with a :class:`Truncation` if the stream stopped inside an object.
    """
    read = getattr(stream, "read1", None) or stream.read
    parser = NettraceParser(name)
    while True:
        chunk = read(chunk_size)
        if not chunk:
            break
        yield from parser.feed(chunk)
    truncation = parser.finish()
    if truncation is not None:
        yield truncation


def events_of(records: Iterable[object]) -> list[Event]:
    """The events among ``records``."""
    return [record for record in records if isinstance(record, Event)]
