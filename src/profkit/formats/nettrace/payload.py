"""Payloads read by their metadata's field list: ``{field name: value}``.

For events whose metadata describes its fields (EventSource events; the runtime's own
events from .NET 5 on). Type codes as NetTraceFormat.md lists them; payload fields are
packed without padding, little-endian, strings UTF-16 with a NUL, arrays prefixed by a
uint16 count. A payload that does not fit its description gives ``None``, never an
exception: one odd event must not cost the rest of a trace.
"""

from __future__ import annotations

import struct
import uuid
from typing import Any

from profkit.formats.nettrace.model import EventMetadata, FieldDescription, FieldType

_FIXED = {
    3: struct.Struct("<I"),  # Boolean32 (turned into bool below)
    5: struct.Struct("<b"),
    6: struct.Struct("<B"),
    7: struct.Struct("<h"),
    8: struct.Struct("<H"),
    9: struct.Struct("<i"),
    10: struct.Struct("<I"),
    11: struct.Struct("<q"),
    12: struct.Struct("<Q"),
    13: struct.Struct("<f"),
    14: struct.Struct("<d"),
    16: struct.Struct("<q"),  # DateTime: FILETIME ticks
    24: struct.Struct("<I"),  # RelLoc: (size << 16 | offset), kept as is
    25: struct.Struct("<I"),  # DataLoc: likewise
    26: struct.Struct("<B"),  # Boolean8 (turned into bool below)
}
_BOOLEANS = (3, 26)
_U16 = struct.Struct("<H")


class _Misfit(Exception):
    """The payload does not fit its description."""


def decode_fields(metadata: EventMetadata, payload: bytes) -> dict[str, Any] | None:
    """The payload's fields by name, or ``None`` (no field list, or it does not fit)."""
    if metadata.fields is None:
        return None
    data = bytes(payload)
    budget = [4 * len(data) + 1024]  # values a payload may yield: bounds empty-object arrays
    try:
        values, _ = _fields(metadata.fields, data, 0, budget)
    except (_Misfit, struct.error, IndexError, UnicodeDecodeError):
        return None
    return values


def _fields(
    fields: tuple[FieldDescription, ...], data: bytes, pos: int, budget: list[int]
) -> tuple[dict[str, Any], int]:
    values: dict[str, Any] = {}
    for field in fields:
        values[field.name], pos = _value(field.type, data, pos, budget)
    return values, pos


def _value(kind: FieldType, data: bytes, pos: int, budget: list[int]) -> tuple[Any, int]:
    budget[0] -= 1
    if budget[0] < 0:
        raise _Misfit
    code = kind.code
    fixed = _FIXED.get(code)
    if fixed is not None:
        if pos + fixed.size > len(data):
            raise _Misfit
        value = fixed.unpack_from(data, pos)[0]
        return (bool(value) if code in _BOOLEANS else value), pos + fixed.size
    if code == 18:  # NUL-terminated UTF-16
        stop = pos
        while True:
            stop = data.find(b"\x00\x00", stop)
            if stop < 0:
                raise _Misfit
            if (stop - pos) % 2 == 0:
                return data[pos:stop].decode("utf-16-le", errors="replace"), stop + 2
            stop += 1
    if code in (4, 23):  # one UTF-16 or UTF-8 code unit
        size = 2 if code == 4 else 1
        if pos + size > len(data):
            raise _Misfit
        return data[pos : pos + size].decode("utf-16-le" if size == 2 else "latin-1"), pos + size
    if code == 17:  # Guid
        if pos + 16 > len(data):
            raise _Misfit
        return uuid.UUID(bytes_le=data[pos : pos + 16]), pos + 16
    if code in (20, 21):  # V6 varints
        return _varint(data, pos, signed=code == 20)
    if code == 1:
        return _fields(kind.fields, data, pos, budget)
    if code in (19, 22) and kind.element is not None:
        if code == 19:
            if pos + 2 > len(data):
                raise _Misfit
            count = _U16.unpack_from(data, pos)[0]
            pos += 2
        else:
            count = kind.count
        items = []
        for _ in range(count):
            item, pos = _value(kind.element, data, pos, budget)
            items.append(item)
        return items, pos
    raise _Misfit  # a type this reader cannot size (Decimal, unknown codes)


def _varint(data: bytes, pos: int, signed: bool) -> tuple[int, int]:
    value = shift = 0
    for index in range(10):
        byte = data[pos + index]
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            if signed:
                value = (value >> 1) ^ -(value & 1)
            return value, pos + index + 1
    raise _Misfit
