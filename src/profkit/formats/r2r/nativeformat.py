"""The "native format" encodings of ReadyToRun images: integers, NativeArray, NativeHashtable.

ReadyToRun stores its method entry points in encodings shared with .NET Native
(readytorun-format.md, "Native Format"): a variable-length integer whose first byte's low
bits say how many bytes follow; a sparse array (``NativeArray``: a block index, then a
small binary tree per block of 16 elements); and a hash table (``NativeHashtable``:
a bucket offset table, then per bucket a run of (low hash byte, relative offset) pairs).

Every read is bounds-checked against the region the caller names, so a hostile image
ends in one :class:`FormatError` with the file offset, never an IndexError or a loop:
counts are checked against the bytes that could hold them before anything iterates
over them, bucket ranges must ascend (so each byte is visited at most once), and tree
walks are depth-limited by construction (four levels per block).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

from profkit.errors import FormatError

_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_I32 = struct.Struct("<i")
_BLOCK = 16


class NativeReader:
    """Bounds-checked decoding over ``data[start:end]`` (offsets are file offsets)."""

    __slots__ = ("data", "end", "path", "start")

    def __init__(self, data: bytes, start: int, end: int, path: str | None) -> None:
        self.data = data
        self.start = start
        self.end = min(end, len(data))
        self.path = path

    def fail(self, kind: str, detail: str, offset: int) -> FormatError:
        return FormatError(kind, detail, path=self.path, offset=offset)  # type: ignore[arg-type]

    def check(self, offset: int, size: int, what: str) -> None:
        """Fail unless ``size`` bytes at ``offset`` lie inside the region."""
        if offset < self.start or offset + size > self.end:
            raise self.fail(
                "truncated" if offset + size > self.end else "malformed",
                f"{what}: {size} byte(s) at 0x{offset:x} lie outside "
                f"0x{self.start:x}..0x{self.end:x}",
                max(offset, 0),
            )

    def byte(self, offset: int, what: str) -> int:
        self.check(offset, 1, what)
        return self.data[offset]

    def u16(self, offset: int, what: str) -> int:
        self.check(offset, 2, what)
        return int(_U16.unpack_from(self.data, offset)[0])

    def u32(self, offset: int, what: str) -> int:
        self.check(offset, 4, what)
        return int(_U32.unpack_from(self.data, offset)[0])

    def unsigned(self, offset: int, what: str = "native integer") -> tuple[int, int]:
        """Decode a native-format unsigned integer: (value, offset after it)."""
        if offset < self.start or offset >= self.end:
            self.check(offset, 1, what)
        data = self.data
        b = data[offset]
        if not b & 1:
            return b >> 1, offset + 1
        if not b & 2:
            self.check(offset, 2, what)
            return (b >> 2) | (data[offset + 1] << 6), offset + 2
        if not b & 4:
            self.check(offset, 3, what)
            return (b >> 3) | (data[offset + 1] << 5) | (data[offset + 2] << 13), offset + 3
        if not b & 8:
            self.check(offset, 4, what)
            v = (b >> 4) | (data[offset + 1] << 4) | (data[offset + 2] << 12)
            return v | (data[offset + 3] << 20), offset + 4
        if not b & 16:
            self.check(offset, 5, what)
            return int(_U32.unpack_from(data, offset + 1)[0]), offset + 5
        raise self.fail("malformed", f"{what}: invalid leading byte 0x{b:02x}", offset)

    def signed(self, offset: int, what: str = "native integer") -> tuple[int, int]:
        """Decode a native-format signed integer: (value, offset after it)."""
        self.check(offset, 1, what)
        data = self.data
        b = data[offset]
        if not b & 1:
            return _sext(b >> 1, 7), offset + 1
        if not b & 2:
            self.check(offset, 2, what)
            return _sext((b >> 2) | (data[offset + 1] << 6), 14), offset + 2
        if not b & 4:
            self.check(offset, 3, what)
            v = (b >> 3) | (data[offset + 1] << 5) | (data[offset + 2] << 13)
            return _sext(v, 21), offset + 3
        if not b & 8:
            self.check(offset, 4, what)
            v = (b >> 4) | (data[offset + 1] << 4) | (data[offset + 2] << 12)
            return _sext(v | (data[offset + 3] << 20), 28), offset + 4
        if not b & 16:
            self.check(offset, 5, what)
            return int(_I32.unpack_from(data, offset + 1)[0]), offset + 5
        raise self.fail("malformed", f"{what}: invalid leading byte 0x{b:02x}", offset)


def _sext(value: int, bits: int) -> int:
    sign = 1 << (bits - 1)
    return (value ^ sign) - sign


def native_array(reader: NativeReader, offset: int) -> Iterator[tuple[int, int]]:
    """Yield ``(index, element offset)`` for every present element of a NativeArray.

    Layout: a header integer ``count << 2 | index_size`` (index entries of 1, 2 or 4
    bytes), one index entry per block of 16 elements giving the block's tree root
    relative to the array base, then per block a binary tree over the low 4 index bits.
    """
    header, base = reader.unsigned(offset, "NativeArray header")
    count, size_code = header >> 2, header & 3
    if size_code == 3:
        raise reader.fail("malformed", "NativeArray index entry size code 3", offset)
    entry = (1, 2, 4)[size_code]
    blocks = (count + _BLOCK - 1) // _BLOCK
    if blocks * entry > reader.end - base:
        raise reader.fail(
            "too_large",
            f"NativeArray of {count} elements needs {blocks * entry} index bytes, "
            f"{max(reader.end - base, 0)} remain",
            offset,
        )
    read = (reader.byte, reader.u16, reader.u32)[size_code]
    for block in range(blocks):
        root = base + read(base + block * entry, "NativeArray block index")
        yield from _block_elements(reader, root, block * _BLOCK, count)


def _block_elements(
    reader: NativeReader, node: int, first: int, count: int
) -> Iterator[tuple[int, int]]:
    """Walk one block's tree: each node is ``value`` with bit 0 = left child follows
    inline, bit 1 = right child at ``node + (value >> 2)``, both clear = a leaf whose
    ``value >> 2`` is the element's low index bits (its data follows the node)."""
    # stack of (node offset, low bits chosen so far, bit being decided)
    stack = [(node, 0, _BLOCK >> 1)]
    while stack:
        offset, low, bit = stack.pop()
        value, after = reader.unsigned(offset, "NativeArray tree node")
        if bit == 0:  # below the last level: this is the element itself
            if first + low < count:
                yield first + low, offset
            continue
        if value & 3 == 0:  # a leaf: one element in this subtree
            index = value >> 2
            if index < _BLOCK and (index & ~(bit * 2 - 1)) == low and first + index < count:
                yield first + index, after
            continue
        if value & 2:
            right = offset + (value >> 2)
            if right <= offset:
                raise reader.fail("malformed", "NativeArray right child points backwards", offset)
            stack.append((right, low | bit, bit >> 1))
        if value & 1:
            stack.append((after, low, bit >> 1))


def native_array_get(reader: NativeReader, offset: int, index: int) -> int | None:
    """The offset of element ``index`` of the NativeArray at ``offset``, or None."""
    header, base = reader.unsigned(offset, "NativeArray header")
    count, size_code = header >> 2, header & 3
    if index >= count or size_code == 3:
        return None
    entry = (1, 2, 4)[size_code]
    read = (reader.byte, reader.u16, reader.u32)[size_code]
    node = base + read(base + (index // _BLOCK) * entry, "NativeArray block index")
    bit = _BLOCK >> 1
    while bit:
        value, after = reader.unsigned(node, "NativeArray tree node")
        if index & bit:
            if value & 2:
                node += value >> 2
                bit >>= 1
                continue
        elif value & 1:
            node = after
            bit >>= 1
            continue
        if value & 3 == 0 and (value >> 2) == index & (_BLOCK - 1):
            return after
        return None
    return node


def native_hashtable(reader: NativeReader, offset: int) -> Iterator[tuple[int, int]]:
    """Yield ``(low hash byte, entry offset)`` for every entry of a NativeHashtable.

    Layout: one byte ``bucket_shift << 2 | index_size``, then ``2**shift + 1`` bucket
    offsets (1, 2 or 4 bytes, relative to the table base); bucket ``b`` spans
    ``[offset[b], offset[b+1])`` and holds (low hash byte, signed relative offset) pairs.
    Bucket bounds must ascend and stay inside the region, so a hostile table cannot
    make us revisit bytes (no cycles) and the work is bounded by the section size.
    """
    header = reader.byte(offset, "NativeHashtable header")
    base = offset + 1
    shift, size_code = header >> 2, header & 3
    if size_code == 3:
        raise reader.fail("malformed", "NativeHashtable index entry size code 3", offset)
    entry = (1, 2, 4)[size_code]
    buckets = 1 << min(shift, 40)
    if (buckets + 1) * entry > reader.end - base:
        raise reader.fail(
            "too_large",
            f"NativeHashtable of {buckets} buckets needs {(buckets + 1) * entry} bytes, "
            f"{max(reader.end - base, 0)} remain",
            offset,
        )
    read = (reader.byte, reader.u16, reader.u32)[size_code]
    start = base + read(base, "NativeHashtable bucket offset")
    for bucket in range(buckets):
        at = base + (bucket + 1) * entry
        end = base + read(at, "NativeHashtable bucket offset")
        if end < start or end > reader.end:
            raise reader.fail(
                "malformed",
                f"NativeHashtable bucket {bucket} spans 0x{start:x}..0x{end:x} "
                "(bucket bounds must ascend inside the section)",
                at,
            )
        pos = start
        while pos < end:
            low = reader.byte(pos, "NativeHashtable entry")
            delta, nxt = reader.signed(pos + 1, "NativeHashtable entry offset")
            target = pos + 1 + delta
            reader.check(target, 1, "NativeHashtable entry target")
            yield low, target
            pos = nxt
        start = end
