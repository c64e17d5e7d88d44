"""Event metadata: what each event type is called and how its payload is laid out.

V4/V5 (a row of a MetadataBlock; dotnet/runtime ep-metadata-generator.c): int32 id,
UTF-16 provider, int32 event id, UTF-16 name, int64 keywords, int32 version, int32
level, then optionally int32 field count and fields (int32 type code, an object's own
field list, UTF-16 name), then V5 tags (int32 size, uint8 kind: 1 opcode, 2 a second
field list that may hold arrays). V6: a uint16-sized row of varuint id, UTF-8 provider,
varuint event id, UTF-8 name, uint16-counted fields, then optional metadata elements.
"""

from __future__ import annotations

import struct

from profkit.formats.nettrace._primitives import I32, U16, Where, utf8, utf16z, varuint
from profkit.formats.nettrace.model import (
    TYPE_ARRAY,
    TYPE_FIXED_ARRAY,
    TYPE_OBJECT,
    EventMetadata,
    FieldDescription,
    FieldType,
)

_TAIL_V4 = struct.Struct("<qii")  # keywords, version, level
_TAG_OPCODE = 1
_TAG_PARAMS_V2 = 2
#: objects nest; a stream that nests deeper than this is damage (and would recurse)
_MAX_DEPTH = 32
_V6_OPCODE, _V6_KEYWORDS, _V6_TEMPLATE, _V6_DESCRIPTION = 1, 3, 4, 5
_V6_KEY_VALUE, _V6_GUID, _V6_LEVEL, _V6_VERSION = 6, 7, 8, 9


def read_metadata_v4(data: bytes, pos: int, end: int, where: Where) -> EventMetadata:
    """One V4/V5 metadata payload, ``data[pos:end]``."""
    where.need(data, pos, 4, end, "metadata id")
    metadata_id = I32.unpack_from(data, pos)[0]
    provider, pos = utf16z(data, pos + 4, end, where, "provider name")
    where.need(data, pos, 4, end, "event id")
    event_id = I32.unpack_from(data, pos)[0]
    name, pos = utf16z(data, pos + 4, end, where, "event name")
    where.need(data, pos, _TAIL_V4.size, end, "keywords, version, level")
    keywords, version, level = _TAIL_V4.unpack_from(data, pos)
    pos += _TAIL_V4.size
    fields: tuple[FieldDescription, ...] | None = None
    opcode = None
    if pos < end:
        fields, pos = _fields_v4(data, pos, end, where, 0)
    while pos < end:  # V5 tags
        where.need(data, pos, 5, end, "metadata tag")
        size, kind = I32.unpack_from(data, pos)[0], data[pos + 4]
        where.need(data, pos + 5, size, end, "metadata tag")
        body = pos + 5
        if kind == _TAG_OPCODE and size >= 1:
            opcode = data[body]
        elif kind == _TAG_PARAMS_V2:
            fields, _ = _fields_v5(data, body, body + size, where, 0)
        pos = body + size
    return EventMetadata(
        metadata_id,
        provider,
        event_id & 0xFFFF,
        name,
        keywords & 0xFFFF_FFFF_FFFF_FFFF,
        version & 0xFF,
        level & 0xFF,
        opcode,
        fields,
    )


def _count(data: bytes, pos: int, end: int, where: Where, item: int) -> int:
    where.need(data, pos, 4, end, "field count")
    count = I32.unpack_from(data, pos)[0]
    if count < 0 or count * item > end - pos - 4:
        raise where.error(
            "too_large", f"{count} fields declared, {end - pos - 4} bytes remain", pos
        )
    return count


def _fields_v4(
    data: bytes, pos: int, end: int, where: Where, depth: int
) -> tuple[tuple[FieldDescription, ...], int]:
    """A V4 field list: int32 count, each (int32 type code, [object fields], UTF-16 name)."""
    if depth > _MAX_DEPTH:
        raise where.error("malformed", f"fields nested deeper than {_MAX_DEPTH}", pos)
    count = _count(data, pos, end, where, 6)
    pos += 4
    fields = []
    for _ in range(count):
        where.need(data, pos, 4, end, "field type")
        code = I32.unpack_from(data, pos)[0]
        pos += 4
        members: tuple[FieldDescription, ...] = ()
        if code == TYPE_OBJECT:
            members, pos = _fields_v4(data, pos, end, where, depth + 1)
        name, pos = utf16z(data, pos, end, where, "field name")
        fields.append(FieldDescription(name, FieldType(code, fields=members)))
    return tuple(fields), pos


def _fields_v5(
    data: bytes, pos: int, end: int, where: Where, depth: int
) -> tuple[tuple[FieldDescription, ...], int]:
    """A V5 (V2Params) field list: each field int32-sized (size counts itself)."""
    if depth > _MAX_DEPTH:
        raise where.error("malformed", f"fields nested deeper than {_MAX_DEPTH}", pos)
    count = _count(data, pos, end, where, 4)
    pos += 4
    fields = []
    for _ in range(count):
        where.need(data, pos, 4, end, "field size")
        size = I32.unpack_from(data, pos)[0]
        if size < 4:
            raise where.error("malformed", f"field description of {size} bytes", pos)
        where.need(data, pos, size, end, "field description")
        name, inner = utf16z(data, pos + 4, pos + size, where, "field name")
        kind, _ = _type_v5(data, inner, pos + size, where, depth)
        fields.append(FieldDescription(name, kind))
        pos += size
    return tuple(fields), pos


def _type_v5(data: bytes, pos: int, end: int, where: Where, depth: int) -> tuple[FieldType, int]:
    if depth > _MAX_DEPTH:
        raise where.error("malformed", f"types nested deeper than {_MAX_DEPTH}", pos)
    where.need(data, pos, 4, end, "field type")
    code = I32.unpack_from(data, pos)[0]
    pos += 4
    if code == TYPE_ARRAY:
        element, pos = _type_v5(data, pos, end, where, depth + 1)
        return FieldType(code, element=element), pos
    if code == TYPE_OBJECT:
        members, pos = _fields_v5(data, pos, end, where, depth + 1)
        return FieldType(code, fields=members), pos
    return FieldType(code), pos


def read_metadata_v6(data: bytes, pos: int, end: int, where: Where) -> tuple[EventMetadata, int]:
    """One V6 metadata row at ``pos``; returns it and the position after it."""
    where.need(data, pos, 2, end, "metadata row size")
    size = U16.unpack_from(data, pos)[0]
    pos += 2
    where.need(data, pos, size, end, "metadata row")
    row_end = pos + size
    metadata_id, pos = varuint(data, pos, row_end, where, "metadata id")
    provider, pos = utf8(data, pos, row_end, where, "provider name")
    event_id, pos = varuint(data, pos, row_end, where, "event id")
    name, pos = utf8(data, pos, row_end, where, "event name")
    fields, pos = _fields_v6(data, pos, row_end, where, 0)
    extra: dict[int, object] = {}
    if pos < row_end:
        _optional_v6(data, pos, row_end, where, extra)
    metadata = EventMetadata(
        metadata_id,
        provider,
        event_id,
        name,
        keywords=int(extra.get(_V6_KEYWORDS, 0)),  # type: ignore[call-overload]
        version=int(extra.get(_V6_VERSION, 0)),  # type: ignore[call-overload]
        level=int(extra.get(_V6_LEVEL, 0)),  # type: ignore[call-overload]
        opcode=extra.get(_V6_OPCODE),  # type: ignore[arg-type]
        fields=fields,
        message_template=extra.get(_V6_TEMPLATE),  # type: ignore[arg-type]
        provider_guid=extra.get(_V6_GUID),  # type: ignore[arg-type]
    )
    return metadata, row_end


def _fields_v6(
    data: bytes, pos: int, end: int, where: Where, depth: int
) -> tuple[tuple[FieldDescription, ...], int]:
    if depth > _MAX_DEPTH:
        raise where.error("malformed", f"fields nested deeper than {_MAX_DEPTH}", pos)
    where.need(data, pos, 2, end, "field count")
    count = U16.unpack_from(data, pos)[0]
    pos += 2
    if count * 2 > end - pos:
        raise where.error("too_large", f"{count} fields declared, {end - pos} bytes remain", pos)
    fields = []
    for _ in range(count):
        where.need(data, pos, 2, end, "field size")
        size = U16.unpack_from(data, pos)[0]
        pos += 2
        where.need(data, pos, size, end, "field description")
        name, inner = utf8(data, pos, pos + size, where, "field name")
        kind, _ = _type_v6(data, inner, pos + size, where, depth)
        fields.append(FieldDescription(name, kind))
        pos += size
    return tuple(fields), pos


def _type_v6(data: bytes, pos: int, end: int, where: Where, depth: int) -> tuple[FieldType, int]:
    where.need(data, pos, 1, end, "field type")
    code = data[pos]
    pos += 1
    if depth > _MAX_DEPTH:
        raise where.error("malformed", f"types nested deeper than {_MAX_DEPTH}", pos - 1)
    if code in (TYPE_ARRAY, TYPE_FIXED_ARRAY, 24, 25):
        element, pos = _type_v6(data, pos, end, where, depth + 1)
        count = 0
        if code == TYPE_FIXED_ARRAY:
            where.need(data, pos, 2, end, "array length")
            count = U16.unpack_from(data, pos)[0]
            pos += 2
        return FieldType(code, element=element, count=count), pos
    if code == TYPE_OBJECT:
        members, pos = _fields_v6(data, pos, end, where, depth + 1)
        return FieldType(code, fields=members), pos
    return FieldType(code), pos


def _optional_v6(data: bytes, pos: int, end: int, where: Where, extra: dict[int, object]) -> None:
    where.need(data, pos, 2, end, "optional metadata size")
    size = U16.unpack_from(data, pos)[0]
    pos += 2
    where.need(data, pos, size, end, "optional metadata")
    stop = pos + size
    while pos < stop:
        kind = data[pos]
        pos += 1
        if kind in (_V6_OPCODE, _V6_LEVEL, _V6_VERSION):
            where.need(data, pos, 1, stop, "optional metadata value")
            extra[kind] = data[pos]
            pos += 1
        elif kind == _V6_KEYWORDS:
            where.need(data, pos, 8, stop, "keywords")
            extra[kind] = int.from_bytes(data[pos : pos + 8], "little")
            pos += 8
        elif kind in (_V6_TEMPLATE, _V6_DESCRIPTION):
            extra[kind], pos = utf8(data, pos, stop, where, "optional metadata text")
        elif kind == _V6_KEY_VALUE:
            _, pos = utf8(data, pos, stop, where, "optional metadata key")
            _, pos = utf8(data, pos, stop, where, "optional metadata value")
        elif kind == _V6_GUID:
            where.need(data, pos, 16, stop, "provider guid")
            extra[kind] = bytes(data[pos : pos + 16])
            pos += 16
        else:  # an element this reader does not know: its size is unknown, so stop here
            return
