"""The nettrace primitives: variable-length integers, the two string encodings, errors.

Every reader in this package works on ``bytes`` with absolute stream offsets carried
beside them, so an error can name the byte of the stream (not of a block) where it went
wrong. The helpers return ``(value, next_position)`` and raise :class:`FormatError`
themselves: they are called once per field on the hot path, so they stay plain
functions over ``bytes`` rather than cursor methods.
"""

from __future__ import annotations

import struct

from profkit.errors import FormatError, FormatErrorKind

#: what the framers read: a whole stream (bytes) or the incremental parser's buffer
Buffer = bytes | bytearray

U16 = struct.Struct("<H")
I32 = struct.Struct("<i")
U32 = struct.Struct("<I")
U64 = struct.Struct("<Q")

#: a varuint64 never needs more than 10 bytes; a longer run is damage, not a number
_MAX_VARINT_BYTES = 10


class Where:
    """The stream name and the offset of ``data[0]``: enough to place any error."""

    __slots__ = ("base", "name")

    def __init__(self, name: str, base: int) -> None:
        self.name = name
        self.base = base

    def error(self, kind: FormatErrorKind, detail: str, pos: int) -> FormatError:
        """A :class:`FormatError` at ``pos`` (an index into the block's bytes)."""
        return FormatError(kind, detail, path=self.name, offset=self.base + pos)

    def need(self, data: bytes, pos: int, size: int, end: int, what: str) -> None:
        """Fail unless ``size`` bytes of ``data`` remain before ``end``."""
        if size < 0:
            raise self.error("malformed", f"{what}: negative size {size}", pos)
        if pos + size > end:
            raise self.error(
                "truncated", f"{what} needs {size} bytes, {max(end - pos, 0)} remain", pos
            )


def varuint(data: bytes, pos: int, end: int, where: Where, what: str) -> tuple[int, int]:
    """Decode one varuint (7 bits a byte, low bits first) at ``pos``."""
    if pos >= end:
        raise where.error("truncated", f"{what}: varint needs a byte, 0 remain", pos)
    byte = data[pos]
    if byte < 0x80:
        return byte, pos + 1
    value = byte & 0x7F
    shift = 7
    start = pos
    pos += 1
    while True:
        if pos >= end:
            raise where.error("truncated", f"{what}: varint cut short", start)
        if pos - start >= _MAX_VARINT_BYTES:
            raise where.error("malformed", f"{what}: varint longer than 10 bytes", start)
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        pos += 1
        if byte < 0x80:
            return value & 0xFFFF_FFFF_FFFF_FFFF, pos
        shift += 7


def utf16z(data: bytes, pos: int, end: int, where: Where, what: str) -> tuple[str, int]:
    """A NUL-terminated UTF-16LE string (V4/V5 metadata): the text and the position after."""
    stop = pos
    while True:
        stop = data.find(b"\x00\x00", stop, end)
        if stop < 0:
            raise where.error("truncated", f"{what}: UTF-16 string without its NUL", pos)
        if (stop - pos) % 2 == 0:
            break
        stop += 1  # the pair straddled two code units: look again one byte on
    text = bytes(data[pos:stop]).decode("utf-16-le", errors="replace")
    return text, stop + 2


def utf8(data: bytes, pos: int, end: int, where: Where, what: str) -> tuple[str, int]:
    """A varuint-length-prefixed UTF-8 string (V6): the text and the position after."""
    size, pos = varuint(data, pos, end, where, what)
    where.need(data, pos, size, end, what)
    return bytes(data[pos : pos + size]).decode("utf-8", errors="replace"), pos + size
