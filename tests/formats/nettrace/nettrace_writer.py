"""A test-only nettrace writer: synthetic V4/V5 and V6 streams for round-trip tests.

It writes what dotnet/runtime's ep-file.c / ep-block.c write (FastSerialization objects,
4-byte aligned block bodies, header-compressed rows delta-coded against the previous
row of the block) and what NetTraceFormat.md describes for V6, independently of the
reader: the reader's structures are not imported, only its model classes.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from profkit.formats.nettrace.model import TYPE_ARRAY, TYPE_OBJECT, EventMetadata, FieldType

SYNC_TIME = (2026, 12, 3, 2, 1, 2, 3, 456)


@dataclass
class RawEvent:
    """An event as a writer sees it: local ids, thread ids (V4) or indexes (V6)."""

    metadata_id: int
    sequence_number: int
    capture_thread: int
    thread: int
    processor: int
    timestamp: int
    stack_id: int
    payload: bytes
    activity_id: bytes = bytes(16)
    related_activity_id: bytes = bytes(16)
    is_sorted: bool = True
    label_list: int = 0


def varuint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def utf16z(text: str) -> bytes:
    return text.encode("utf-16-le") + b"\x00\x00"


def utf8(text: str) -> bytes:
    data = text.encode("utf-8")
    return varuint(len(data)) + data


class NettraceWriter:
    """Builds one stream; call the block methods in stream order, then :meth:`finish`."""

    def __init__(self, version: int = 4, pointer_size: int = 8, compressed: bool = True) -> None:
        self.version = version
        self.pointer_size = pointer_size
        self.compressed = compressed
        self.out = bytearray(b"Nettrace")
        if version >= 6:
            self.out += struct.pack("<III", 0, version, 0)
        else:
            self.out += struct.pack("<I", 20) + b"!FastSerialization.1"

    # -- framing ------------------------------------------------------------------------

    def _object(self, name: bytes, body: bytes, *, fixed: bool = False) -> None:
        out = self.out
        out += b"\x05\x05\x01" + struct.pack(
            "<iii", 4 if fixed else 2, 4 if fixed else 2, len(name)
        )
        out += name + b"\x06"
        if not fixed:
            out += struct.pack("<i", len(body))
            out += bytes((-len(out)) % 4)
        out += body + b"\x06"

    def _block(self, kind: int, name: bytes, body: bytes) -> None:
        if self.version >= 6:
            self.out += struct.pack("<I", len(body) | kind << 24) + body
        else:
            self._object(name, body)

    def trace(self, qpc: int = 1000, frequency: int = 10**9, pid: int = 42, cpus: int = 4) -> None:
        fixed = struct.pack("<8hqqi", *SYNC_TIME, qpc, frequency, self.pointer_size)
        if self.version >= 6:
            pairs = {"ProcessId": str(pid), "HardwareThreadCount": str(cpus)}
            body = fixed + struct.pack("<i", len(pairs))
            body += b"".join(utf8(k) + utf8(v) for k, v in pairs.items())
            self._block(1, b"Trace", body)
        else:
            self._object(b"Trace", fixed + struct.pack("<iii", pid, cpus, 1000000), fixed=True)

    def finish(self, end: bool = True) -> bytes:
        if end:
            self.out += struct.pack("<I", 0) if self.version >= 6 else b"\x01"
        return bytes(self.out)

    # -- blocks -------------------------------------------------------------------------

    def metadata(self, items: list[EventMetadata]) -> None:
        if self.version >= 6:
            body = struct.pack("<H", 0) + b"".join(self._metadata_v6(item) for item in items)
            self._block(3, b"MetadataBlock", body)
            return
        rows = [
            RawEvent(0, 0, 0, 0, 0, 0, 0, self._metadata_v4(item), is_sorted=True) for item in items
        ]
        self._block(3, b"MetadataBlock", self._rows(rows))

    def events(self, rows: list[RawEvent]) -> None:
        self._block(2, b"EventBlock", self._rows(rows))

    def stacks(self, first: int, stacks: list[tuple[int, ...]]) -> None:
        fmt = "Q" if self.pointer_size == 8 else "I"
        body = struct.pack("<II", first, len(stacks))
        for ips in stacks:
            raw = struct.pack(f"<{len(ips)}{fmt}", *ips)
            body += struct.pack("<I", len(raw)) + raw
        self._block(5, b"StackBlock", body)

    def sequence_point(self, timestamp: int, threads: dict[int, int], flags: int = 0) -> None:
        if self.version >= 6:
            body = struct.pack("<QII", timestamp, flags, len(threads))
            body += b"".join(varuint(k) + varuint(v) for k, v in threads.items())
        else:
            body = struct.pack("<qI", timestamp, len(threads))
            body += b"".join(struct.pack("<QI", k, v) for k, v in threads.items())
        self._block(4, b"SPBlock", body)

    def threads(self, rows: dict[int, tuple[int, str]]) -> None:
        """V6: thread index -> (OS thread id, name)."""
        body = b""
        for index, (os_id, name) in rows.items():
            row = varuint(index) + b"\x03" + varuint(os_id) + b"\x01" + utf8(name)
            body += struct.pack("<H", len(row)) + row
        self._block(6, b"", body)

    def label_lists(self, first: int, activity_ids: list[bytes]) -> None:
        """V6: one label list (an activity id) per entry."""
        body = struct.pack("<II", first, len(activity_ids))
        body += b"".join(b"\x81" + activity for activity in activity_ids)
        self._block(8, b"", body)

    def unknown_block(self, kind: int, body: bytes) -> None:
        self._block(kind, b"", body)

    # -- rows ---------------------------------------------------------------------------

    def _rows(self, rows: list[RawEvent]) -> bytes:
        stamps = [row.timestamp for row in rows] or [0]
        header = struct.pack("<HHqq", 20, int(self.compressed), min(stamps), max(stamps))
        body = bytearray(header)
        last = RawEvent(0, 0, 0, 0, 0, 0, 0, b"")
        for row in rows:
            if self.compressed:
                body += self._compressed(row, last)
                last = row
            else:
                body += self._plain(row)
        return bytes(body)

    def _plain(self, row: RawEvent) -> bytes:
        raw_id = row.metadata_id | (0 if row.is_sorted else 0x8000_0000)
        head = struct.pack(
            "<IIQQIIQ", raw_id, row.sequence_number, row.thread, row.capture_thread,
            row.processor, row.stack_id, row.timestamp,
        )  # fmt: skip
        if self.version >= 6:
            head += struct.pack("<I", row.label_list)
        else:
            head += row.activity_id + row.related_activity_id
        head += struct.pack("<I", len(row.payload))
        body = head + row.payload
        body += bytes((-(len(body) + 4)) % 4)
        return struct.pack("<I", len(body)) + body

    def _compressed(self, row: RawEvent, last: RawEvent) -> bytes:
        flags, out = 0, b""
        if row.metadata_id != last.metadata_id:
            flags |= 1
            out += varuint(row.metadata_id)
        expected = last.sequence_number + (1 if row.metadata_id else 0)
        if (
            row.sequence_number != expected & 0xFFFF_FFFF
            or row.capture_thread != last.capture_thread
            or row.processor != last.processor
        ):
            flags |= 2
            delta = (row.sequence_number - last.sequence_number - 1) & 0xFFFF_FFFF
            out += varuint(delta) + varuint(row.capture_thread) + varuint(row.processor)
        if row.thread != last.thread:
            flags |= 4
            out += varuint(row.thread)
        if row.stack_id != last.stack_id:
            flags |= 8
            out += varuint(row.stack_id)
        out += varuint((row.timestamp - last.timestamp) & 0xFFFF_FFFF_FFFF_FFFF)
        if self.version >= 6:
            if row.label_list != last.label_list:
                flags |= 16
                out += varuint(row.label_list)
        else:
            if row.activity_id != last.activity_id:
                flags |= 16
                out += row.activity_id
            if row.related_activity_id != last.related_activity_id:
                flags |= 32
                out += row.related_activity_id
        if row.is_sorted:
            flags |= 64
        if len(row.payload) != len(last.payload):
            flags |= 128
            out += varuint(len(row.payload))
        return bytes([flags]) + out + row.payload

    # -- metadata encodings -------------------------------------------------------------

    def _metadata_v4(self, item: EventMetadata) -> bytes:
        out = struct.pack("<i", item.metadata_id) + utf16z(item.provider)
        out += struct.pack("<i", item.event_id) + utf16z(item.name)
        out += struct.pack("<Qii", item.keywords, item.version, item.level)
        fields = item.fields
        if fields is not None:
            if any(_has_array(f.type) for f in fields):  # V5: arrays need the V2Params tag
                out += struct.pack("<i", 0)
                params = _fields_v5(fields)
                out += struct.pack("<iB", len(params), 2) + params
            else:
                out += _fields_v4(fields)
        if item.opcode is not None:
            out += struct.pack("<iBB", 1, 1, item.opcode)
        return out

    def _metadata_v6(self, item: EventMetadata) -> bytes:
        row = varuint(item.metadata_id) + utf8(item.provider) + varuint(item.event_id)
        row += utf8(item.name) + _fields_v6(item.fields or ())
        optional = b""
        if item.opcode is not None:
            optional += bytes([1, item.opcode])
        optional += b"\x03" + struct.pack("<Q", item.keywords)
        optional += bytes([8, item.level, 9, item.version])
        row += struct.pack("<H", len(optional)) + optional
        return struct.pack("<H", len(row)) + row


def _has_array(kind: FieldType) -> bool:
    return kind.code == TYPE_ARRAY or any(_has_array(f.type) for f in kind.fields)


def _fields_v4(fields: tuple) -> bytes:
    out = struct.pack("<i", len(fields))
    for field in fields:
        out += struct.pack("<i", field.type.code)
        if field.type.code == TYPE_OBJECT:
            out += _fields_v4(field.type.fields)
        out += utf16z(field.name)
    return out


def _type_v5(kind: FieldType) -> bytes:
    out = struct.pack("<i", kind.code)
    if kind.code == TYPE_ARRAY:
        assert kind.element is not None
        out += _type_v5(kind.element)
    elif kind.code == TYPE_OBJECT:
        out += _fields_v5(kind.fields)
    return out


def _fields_v5(fields: tuple) -> bytes:
    out = struct.pack("<i", len(fields))
    for field in fields:
        body = utf16z(field.name) + _type_v5(field.type)
        out += struct.pack("<i", len(body) + 4) + body
    return out


def _type_v6(kind: FieldType) -> bytes:
    out = bytes([kind.code])
    if kind.element is not None:
        out += _type_v6(kind.element)
        if kind.code == 22:
            out += struct.pack("<H", kind.count)
    elif kind.code == TYPE_OBJECT:
        out += _fields_v6(kind.fields)
    return out


def _fields_v6(fields: tuple) -> bytes:
    out = struct.pack("<H", len(fields))
    for field in fields:
        body = utf8(field.name) + _type_v6(field.type)
        out += struct.pack("<H", len(body)) + body
    return out
