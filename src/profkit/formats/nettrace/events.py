"""Event rows: the headers and payloads inside EventBlocks (and V4/V5 MetadataBlocks).

A block starts with uint16 header size, uint16 flags, int64 min and max timestamps,
then rows until the block ends. Flag 1 means header compression: each row is a flags
byte and only the fields that changed since the previous row, as varuints, with the
sequence number and timestamp delta-coded (NetTraceFormat.md, "Header compression";
dotnet/runtime ep-block.c ``ep_event_block_base_write_event``). Without it a row is a
fixed header, the payload, and padding up to the row's size field.

V4/V5 rows carry thread ids and two activity GUIDs; V6 rows carry thread indexes and a
label list id instead. :func:`iter_rows` yields the same tuple for both.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

from profkit.formats.nettrace._primitives import U16, Where, varuint

#: size, metadata id (high bit: not sorted), sequence, thread, capture thread, processor,
#: stack id, timestamp, activity id, related activity id, payload size
_ROW_V4 = struct.Struct("<IIIQQIIQ16s16sI")
#: V6: the two GUIDs become a label list id
_ROW_V6 = struct.Struct("<IIIQQIIQII")
_BLOCK_HEADER = struct.Struct("<HHqq")
_NO_ACTIVITY = bytes(16)
_NOT_SORTED = 0x8000_0000
_U32 = 0xFFFF_FFFF
_U64 = 0xFFFF_FFFF_FFFF_FFFF

#: (metadata id, sequence number, capture thread, thread, processor, stack id,
#:  timestamp, activity id, related activity id, label list id, is sorted,
#:  payload start, payload end)
Row = tuple[int, int, int, int, int, int, int, bytes, bytes, int, bool, int, int]


def block_body(block: bytes, where: Where) -> tuple[int, bool]:
    """Where the rows of an event or V4/V5 metadata block start, and if compressed."""
    where.need(block, 0, _BLOCK_HEADER.size, len(block), "event block header")
    header_size, flags, _, _ = _BLOCK_HEADER.unpack_from(block, 0)
    if header_size < _BLOCK_HEADER.size:
        raise where.error("malformed", f"event block header of {header_size} bytes", 0)
    where.need(block, 0, header_size, len(block), "event block header")
    return header_size, bool(flags & 1)


def iter_rows(block: bytes, where: Where, v6: bool) -> Iterator[Row]:
    """Every row of an event (or V4/V5 metadata) block, headers decoded."""
    pos, compressed = block_body(block, where)
    if compressed:
        yield from _compressed_rows(block, pos, where, v6)
    else:
        yield from _plain_rows(block, pos, where, v6)


def _plain_rows(block: bytes, pos: int, where: Where, v6: bool) -> Iterator[Row]:
    layout = _ROW_V6 if v6 else _ROW_V4
    end = len(block)
    while pos < end:
        where.need(block, pos, layout.size, end, "event header")
        fields = layout.unpack_from(block, pos)
        size, raw_id, seq, thread, capture, proc, stack, stamp = fields[:8]
        activity = related = _NO_ACTIVITY
        label = 0
        if v6:
            label, payload_size = fields[8], fields[9]
        else:
            activity, related, payload_size = fields[8], fields[9], fields[10]
        row_end = pos + 4 + size
        start = pos + layout.size
        if payload_size > row_end - start or row_end > end:
            raise where.error(
                "malformed", f"event of {size} bytes cannot hold a {payload_size}-byte payload", pos
            )
        yield (
            raw_id & ~_NOT_SORTED,
            seq,
            capture,
            thread,
            proc,
            stack,
            stamp,
            activity,
            related,
            label,
            not raw_id & _NOT_SORTED,
            start,
            start + payload_size,
        )
        pos = row_end


def _compressed_rows(block: bytes, pos: int, where: Where, v6: bool) -> Iterator[Row]:
    end = len(block)
    meta = seq = capture = thread = proc = stack = stamp = label = payload_size = 0
    activity = related = _NO_ACTIVITY
    while pos < end:
        flags = block[pos]
        pos += 1
        if flags & 1:
            meta, pos = varuint(block, pos, end, where, "metadata id")
        if flags & 2:
            delta, pos = varuint(block, pos, end, where, "sequence number")
            seq = (seq + delta + 1) & _U32
            capture, pos = varuint(block, pos, end, where, "capture thread")
            proc, pos = varuint(block, pos, end, where, "processor number")
        elif meta:
            seq = (seq + 1) & _U32
        if flags & 4:
            thread, pos = varuint(block, pos, end, where, "thread id")
        if flags & 8:
            stack, pos = varuint(block, pos, end, where, "stack id")
        byte = block[pos] if pos < end else 0x80  # the timestamp delta, inlined: every row has one
        if byte < 0x80:
            stamp = (stamp + byte) & _U64
            pos += 1
        else:
            delta, pos = varuint(block, pos, end, where, "timestamp")
            stamp = (stamp + delta) & _U64
        if v6:
            if flags & 16:
                label, pos = varuint(block, pos, end, where, "label list id")
        else:
            if flags & 16:
                where.need(block, pos, 16, end, "activity id")
                activity = bytes(block[pos : pos + 16])
                pos += 16
            if flags & 32:
                where.need(block, pos, 16, end, "related activity id")
                related = bytes(block[pos : pos + 16])
                pos += 16
        if flags & 128:
            payload_size, pos = varuint(block, pos, end, where, "payload size")
        if pos + payload_size > end:
            where.need(block, pos, payload_size, end, "event payload")
        yield (
            meta,
            seq,
            capture,
            thread,
            proc,
            stack,
            stamp,
            activity,
            related,
            label,
            bool(flags & 64),
            pos,
            pos + payload_size,
        )
        pos += payload_size


def metadata_block_v6_body(block: bytes, where: Where) -> int:
    """Where a V6 metadata block's rows start (after its uint16-sized header)."""
    where.need(block, 0, 2, len(block), "metadata block header")
    size = U16.unpack_from(block, 0)[0]
    where.need(block, 2, size, len(block), "metadata block header")
    return 2 + size
