"""Framing: the stream header, and the objects (V4, V5) or blocks (V6) that follow it.

A V4/V5 stream is ``Nettrace`` + the FastSerialization header, then objects: tag 5
(BeginPrivateObject), a type object (5, 1, int32 version, int32 minimum reader version,
int32 name length, name, 6), the payload, tag 6 (EndObject); tag 1 ends the stream.
The Trace object's payload is 48 fixed bytes; every block object's is an int32 size,
zero padding to a 4-byte stream offset, then the size's bytes (dotnet/runtime
ep-block.c ``ep_block_fast_serialize``). A V6 stream is ``Nettrace``, uint32 0, uint32
major, uint32 minor, then blocks of uint32 (size | kind << 24) + size bytes.

Both framers take the bytes seen so far and return ``None`` when the next frame is not
all there yet: the incremental parser waits for more, the file reader reports a cut.
"""

from __future__ import annotations

from dataclasses import dataclass

from profkit.formats.nettrace._primitives import I32, U32, Buffer, Where

MAGIC = b"Nettrace"
FAST_SERIALIZATION = b"!FastSerialization.1"

# Block kinds, numbered as V6 numbers them; V4/V5 object names map onto the same numbers.
END = 0
TRACE = 1
EVENT = 2
METADATA = 3
SEQUENCE_POINT = 4
STACK = 5
THREAD = 6
REMOVE_THREAD = 7
LABEL_LIST = 8

_OBJECT_NAMES = {
    b"Trace": TRACE,
    b"EventBlock": EVENT,
    b"MetadataBlock": METADATA,
    b"StackBlock": STACK,
    b"SPBlock": SEQUENCE_POINT,
}
_TAG_NULL = 1
_TAG_BEGIN_PRIVATE = 5
_TAG_END = 6
#: the fixed payload of a version 4 Trace object: SYSTEMTIME, sync QPC, frequency, 4 ints
TRACE_OBJECT_SIZE = 48
#: CoreCLR writes blocks of at most 100 KB; a larger size field is damage, and waiting
#: for its bytes would buffer without bound
MAX_BLOCK_SIZE = 64 << 20
#: the oldest and newest major versions read here
SUPPORTED_MAJORS = (4, 5, 6)


@dataclass(frozen=True, slots=True)
class StreamHeader:
    """The stream's version, and how many bytes its header took."""

    format_version: int  #: 4 for FastSerialization streams (V4 and V5), else the major
    minor_version: int
    size: int


@dataclass(frozen=True, slots=True)
class Frame:
    """One object or block: ``data[start:end]`` is its payload, ``next`` what follows."""

    kind: int
    offset: int  #: where the frame starts (index into the framer's bytes)
    start: int
    end: int
    next: int
    version: int = 0


def read_stream_header(data: Buffer, where: Where) -> StreamHeader | None:
    """The header at the start of ``data``, or ``None`` if it is not all there yet."""
    have = min(len(data), len(MAGIC))
    if bytes(data[:have]) != MAGIC[:have]:
        raise where.error("bad_magic", "not a nettrace stream (no 'Nettrace' magic)", 0)
    if len(data) < 12:
        return None
    first = U32.unpack_from(data, 8)[0]
    if first == 0:  # V6: Reserved = 0, then the major and minor versions
        if len(data) < 20:
            return None
        major, minor = U32.unpack_from(data, 12)[0], U32.unpack_from(data, 16)[0]
        if major < 6 or major not in SUPPORTED_MAJORS:
            raise where.error("unsupported_version", f"nettrace major version {major}", 12)
        return StreamHeader(major, minor, 20)
    if first != len(FAST_SERIALIZATION):
        raise where.error(
            "bad_magic", f"no FastSerialization header (length field {first}, expected 20)", 8
        )
    size = 12 + len(FAST_SERIALIZATION)
    if len(data) < size:
        return None
    if bytes(data[12:size]) != FAST_SERIALIZATION:
        raise where.error("bad_magic", "no '!FastSerialization.1' after 'Nettrace'", 12)
    return StreamHeader(4, 0, size)


def next_block(data: Buffer, pos: int, where: Where) -> Frame | None:
    """The V6 block at ``pos``, or ``None`` if it is not all in ``data`` yet."""
    if pos + 4 > len(data):
        return None
    word = U32.unpack_from(data, pos)[0]
    kind, size = word >> 24, word & 0xFFFFFF
    if pos + 4 + size > len(data):
        return None
    return Frame(kind, pos, pos + 4, pos + 4 + size, pos + 4 + size)


def next_object(data: Buffer, pos: int, where: Where) -> Frame | None:
    """The V4/V5 object at ``pos`` (or the end tag), or ``None`` if it is not all there."""
    end = len(data)
    if pos >= end:
        return None
    tag = data[pos]
    if tag == _TAG_NULL:
        return Frame(END, pos, pos + 1, pos + 1, pos + 1)
    if tag != _TAG_BEGIN_PRIVATE:
        raise where.error("malformed", f"expected an object (tag 5) or the end (1), got {tag}", pos)
    if pos + 15 > end:
        return None
    if data[pos + 1] != _TAG_BEGIN_PRIVATE or data[pos + 2] != _TAG_NULL:
        raise where.error("malformed", "object type does not start with tags 5, 1", pos + 1)
    version = I32.unpack_from(data, pos + 3)[0]
    name_size = I32.unpack_from(data, pos + 11)[0]
    if not 0 < name_size <= 32:
        raise where.error("malformed", f"object type name of {name_size} bytes", pos + 11)
    body = pos + 15 + name_size + 1
    if body > end:
        return None
    name = bytes(data[pos + 15 : body - 1])
    kind = _OBJECT_NAMES.get(name)
    if kind is None:
        raise where.error("malformed", f"unknown object type {name!r}", pos + 15)
    if data[body - 1] != _TAG_END:
        raise where.error("malformed", "object type not closed by tag 6", body - 1)
    if kind == TRACE:
        if version != 4:
            raise where.error(
                "unsupported_version", f"Trace object version {version} (only 4 is nettrace)", pos
            )
        start, stop = body, body + TRACE_OBJECT_SIZE
    else:
        if body + 4 > end:
            return None
        size = I32.unpack_from(data, body)[0]
        if size < 0:
            raise where.error("malformed", f"block size {size}", body)
        if size > MAX_BLOCK_SIZE:
            raise where.error("too_large", f"block size {size} (at most {MAX_BLOCK_SIZE})", body)
        start = body + 4
        start += (-(where.base + start)) % 4  # zero padding to a 4-byte stream offset
        stop = start + size
    if stop + 1 > end:
        return None
    if data[stop] != _TAG_END:
        raise where.error("malformed", f"object not closed by tag 6 (got {data[stop]})", stop)
    return Frame(kind, pos, start, stop, stop + 1, version)
