"""The small blocks: the trace header, stacks, sequence points, V6 threads and labels.

Layouts (NetTraceFormat.md, NetTraceFormat_v5.md; dotnet/runtime ep-file.c, ep-block.c):
- V4 Trace object: SYSTEMTIME (8 int16), int64 sync QPC, int64 QPC frequency, int32
  pointer size, process id, processor count, sampling interval (ns).
- V6 TraceBlock: the same first 36 bytes, then int32 count of UTF-8 key/value pairs.
- StackBlock: uint32 first id, uint32 count, each stack uint32 size + size bytes of IPs.
- SPBlock (V4): int64 timestamp, uint32 count, each (uint64 thread id, uint32 sequence).
- SequencePoint (V6): uint64 timestamp, uint32 flags, uint32 count, each (varuint thread
  index, varuint sequence).
"""

from __future__ import annotations

import struct
from datetime import UTC, datetime

from profkit.formats.nettrace._primitives import U16, U32, Where, utf8, varuint
from profkit.formats.nettrace.model import SequencePoint, ThreadInfo, TraceHeader

_SYSTEMTIME = struct.Struct("<8h")
_TRACE_V4 = struct.Struct("<8hqqiiii")
_TRACE_V6 = struct.Struct("<8hqqii")
_STACK_HEADER = struct.Struct("<II")
_SP_V4 = struct.Struct("<qI")
_SP_V4_THREAD = struct.Struct("<QI")
_SP_V6 = struct.Struct("<QII")
_GUID_KINDS = {1: 16, 2: 16, 3: 16}  # activity, related activity, trace id
_THREAD_NAME, _THREAD_PROCESS, _THREAD_OS_ID, _THREAD_KEY_VALUE = 1, 2, 3, 4


def _sync_time(fields: tuple[int, ...], where: Where) -> datetime:
    year, month, _, day, hour, minute, second, millisecond = fields[:8]
    try:
        return datetime(year, month, day, hour, minute, second, millisecond * 1000, tzinfo=UTC)
    except ValueError:
        raise where.error("malformed", f"sync time {fields[:8]} is not a date", 0) from None


def _checked_frequency(frequency: int, pointer_size: int, where: Where) -> None:
    if frequency <= 0:
        raise where.error("malformed", f"QPC frequency {frequency}", 24)
    if pointer_size not in (4, 8):
        raise where.error("malformed", f"pointer size {pointer_size}", 32)


def read_trace_object(block: bytes, where: Where) -> TraceHeader:
    """The V4/V5 Trace object's 48 bytes."""
    where.need(block, 0, _TRACE_V4.size, len(block), "Trace object")
    fields = _TRACE_V4.unpack_from(block, 0)
    qpc, frequency, pointer_size, pid, processors, rate = fields[8:]
    _checked_frequency(frequency, pointer_size, where)
    return TraceHeader(
        4, 0, _sync_time(fields, where), qpc, frequency, pointer_size, pid, processors, rate
    )


def read_trace_block(block: bytes, where: Where, major: int, minor: int) -> TraceHeader:
    """The V6 TraceBlock: fixed fields, then key/value pairs (three with known meanings)."""
    end = len(block)
    where.need(block, 0, _TRACE_V6.size, end, "trace block")
    fields = _TRACE_V6.unpack_from(block, 0)
    qpc, frequency, pointer_size, count = fields[8:]
    _checked_frequency(frequency, pointer_size, where)
    if count < 0 or count * 2 > end - _TRACE_V6.size:
        raise where.error("too_large", f"{count} key/value pairs declared", 36)
    pos = _TRACE_V6.size
    pairs: dict[str, str] = {}
    for _ in range(count):
        key, pos = utf8(block, pos, end, where, "trace key")
        pairs[key], pos = utf8(block, pos, end, where, "trace value")

    def number(key: str) -> int | None:
        text = pairs.get(key, "")
        return int(text) if text.strip().isdigit() else None

    return TraceHeader(
        major,
        minor,
        _sync_time(fields, where),
        qpc,
        frequency,
        pointer_size,
        number("ProcessId"),
        number("HardwareThreadCount"),
        number("ExpectedCPUSamplingRate"),
        pairs,
    )


def read_stacks(block: bytes, where: Where, pointer_size: int) -> tuple[int, list[bytes]]:
    """A StackBlock: the first id and each stack's raw IP bytes (checked for size)."""
    end = len(block)
    where.need(block, 0, _STACK_HEADER.size, end, "stack block header")
    first, count = _STACK_HEADER.unpack_from(block, 0)
    if count * 4 > end - 8:
        raise where.error("too_large", f"{count} stacks declared, {end - 8} bytes remain", 4)
    pos = 8
    stacks = []
    for _ in range(count):
        where.need(block, pos, 4, end, "stack size")
        size = U32.unpack_from(block, pos)[0]
        pos += 4
        where.need(block, pos, size, end, "stack")
        if size % pointer_size:
            raise where.error(
                "malformed", f"stack of {size} bytes, pointers of {pointer_size}", pos
            )
        stacks.append(bytes(block[pos : pos + size]))
        pos += size
    return first, stacks


def decode_ips(raw: bytes, pointer_size: int) -> tuple[int, ...]:
    """A stack's IP bytes as integers, innermost first."""
    count = len(raw) // pointer_size
    return struct.unpack(f"<{count}{'Q' if pointer_size == 8 else 'I'}", raw)


def read_sequence_point_v4(block: bytes, where: Where, offset: int) -> SequencePoint:
    end = len(block)
    where.need(block, 0, _SP_V4.size, end, "sequence point")
    stamp, count = _SP_V4.unpack_from(block, 0)
    if count * _SP_V4_THREAD.size > end - _SP_V4.size:
        raise where.error("too_large", f"{count} threads declared in a sequence point", 8)
    threads = {}
    for index in range(count):
        thread, seq = _SP_V4_THREAD.unpack_from(block, _SP_V4.size + index * _SP_V4_THREAD.size)
        threads[thread] = seq
    return SequencePoint(stamp, threads, 0, offset)


def read_sequence_point_v6(block: bytes, where: Where, offset: int) -> SequencePoint:
    end = len(block)
    where.need(block, 0, _SP_V6.size, end, "sequence point")
    stamp, flags, count = _SP_V6.unpack_from(block, 0)
    if count * 2 > end - _SP_V6.size:
        raise where.error("too_large", f"{count} threads declared in a sequence point", 12)
    pos = _SP_V6.size
    threads = {}
    for _ in range(count):
        index, pos = varuint(block, pos, end, where, "thread index")
        threads[index], pos = varuint(block, pos, end, where, "sequence number")
    return SequencePoint(stamp, threads, flags, offset)


def read_threads(block: bytes, where: Where) -> list[ThreadInfo]:
    """A V6 ThreadBlock: uint16-sized rows of varuint index + optional entries."""
    end = len(block)
    pos = 0
    rows = []
    while pos < end:
        where.need(block, pos, 2, end, "thread row size")
        size = U16.unpack_from(block, pos)[0]
        pos += 2
        where.need(block, pos, size, end, "thread row")
        stop = pos + size
        index, pos = varuint(block, pos, stop, where, "thread index")
        info: dict[int, object] = {}
        pairs: dict[str, str] = {}
        while pos < stop:
            kind = block[pos]
            pos += 1
            if kind == _THREAD_NAME:
                info[kind], pos = utf8(block, pos, stop, where, "thread name")
            elif kind in (_THREAD_PROCESS, _THREAD_OS_ID):
                info[kind], pos = varuint(block, pos, stop, where, "thread id")
            elif kind == _THREAD_KEY_VALUE:
                key, pos = utf8(block, pos, stop, where, "thread key")
                pairs[key], pos = utf8(block, pos, stop, where, "thread value")
            else:
                break  # unknown entry: its size is unknown, the rest of the row is skipped
        pos = stop
        rows.append(
            ThreadInfo(
                index,
                info.get(_THREAD_NAME),  # type: ignore[arg-type]
                info.get(_THREAD_PROCESS),  # type: ignore[arg-type]
                info.get(_THREAD_OS_ID),  # type: ignore[arg-type]
                pairs,
            )
        )
    return rows


def read_removed_threads(block: bytes, where: Where) -> list[tuple[int, int]]:
    """A V6 RemoveThreadBlock: (thread index, last sequence number) pairs."""
    end = len(block)
    pos = 0
    pairs = []
    while pos < end:
        index, pos = varuint(block, pos, end, where, "thread index")
        seq, pos = varuint(block, pos, end, where, "sequence number")
        pairs.append((index, seq))
    return pairs


def read_label_lists(block: bytes, where: Where) -> tuple[int, list[tuple[bytes, bytes]]]:
    """A V6 LabelListBlock: the first index and, per list, (activity id, related id).

    Only the activity ids are kept (what V4 events carried); other labels are skipped
    by their declared layouts.
    """
    end = len(block)
    where.need(block, 0, 8, end, "label list header")
    first, count = _STACK_HEADER.unpack_from(block, 0)
    if count > end - 8:
        raise where.error("too_large", f"{count} label lists declared, {end - 8} bytes remain", 4)
    pos = 8
    lists = []
    for _ in range(count):
        ids = [bytes(16), bytes(16)]
        while True:
            where.need(block, pos, 1, end, "label")
            kind = block[pos]
            pos += 1
            pos = _skip_label(block, pos, end, where, kind & 0x7F, ids)
            if kind & 0x80:
                break
        lists.append((ids[0], ids[1]))
    return first, lists


def _skip_label(block: bytes, pos: int, end: int, where: Where, kind: int, ids: list[bytes]) -> int:
    if kind in _GUID_KINDS:
        where.need(block, pos, 16, end, "label guid")
        if kind <= 2:
            ids[kind - 1] = bytes(block[pos : pos + 16])
        return pos + 16
    if kind == 4 or kind == 8:  # span id, keywords
        where.need(block, pos, 8, end, "label value")
        return pos + 8
    if kind in (7, 9, 10):  # opcode, level, version
        where.need(block, pos, 1, end, "label value")
        return pos + 1
    if kind == 5:
        _, pos = utf8(block, pos, end, where, "label key")
        return utf8(block, pos, end, where, "label value")[1]
    if kind == 6:
        _, pos = utf8(block, pos, end, where, "label key")
        return varuint(block, pos, end, where, "label value")[1]
    raise where.error("malformed", f"unknown label kind {kind}", pos - 1)
