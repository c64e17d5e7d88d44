"""Test-side writers for the native-format encodings (the reader's oracle).

Written from readytorun-format.md's "Native Format" description, independently of the
reader: integers, NativeArray (block index + per-block trees), NativeHashtable.
"""

from __future__ import annotations

import struct


def enc_unsigned(v: int) -> bytes:
    if v < 1 << 7:
        return bytes([v << 1])
    if v < 1 << 14:
        return struct.pack("<H", (v << 2) | 1)
    if v < 1 << 21:
        x = (v << 3) | 3
        return bytes([x & 0xFF, (x >> 8) & 0xFF, (x >> 16) & 0xFF])
    if v < 1 << 28:
        return struct.pack("<I", (v << 4) | 7)
    return bytes([15]) + struct.pack("<I", v)


def enc_signed(v: int) -> bytes:
    if -(1 << 6) <= v < 1 << 6:
        return bytes([(v << 1) & 0xFF])
    if -(1 << 13) <= v < 1 << 13:
        return struct.pack("<H", ((v << 2) | 1) & 0xFFFF)
    if -(1 << 20) <= v < 1 << 20:
        x = ((v << 3) | 3) & 0xFFFFFF
        return bytes([x & 0xFF, (x >> 8) & 0xFF, (x >> 16) & 0xFF])
    if -(1 << 27) <= v < 1 << 27:
        return struct.pack("<I", ((v << 4) | 7) & 0xFFFFFFFF)
    return bytes([15]) + struct.pack("<i", v)


def enc_compressed(v: int) -> bytes:
    """ECMA-335 II.23.2 compressed unsigned integer."""
    if v < 0x80:
        return bytes([v])
    if v < 0x4000:
        return struct.pack(">H", v | 0x8000)
    return struct.pack(">I", v | 0xC0000000)


def _subtree(items: dict[int, bytes], bit: int) -> bytes:
    """Encode the elements of one block subtree (keys are the low 4 index bits)."""
    if bit == 0:
        ((_, data),) = items.items()
        return data
    if len(items) == 1:
        ((low, data),) = items.items()
        return enc_unsigned(low << 2) + data
    left = {k: v for k, v in items.items() if not k & bit}
    right = {k: v for k, v in items.items() if k & bit}
    lbytes = _subtree(left, bit >> 1) if left else b""
    rbytes = _subtree(right, bit >> 1) if right else b""
    flags = (1 if left else 0) | (2 if right else 0)
    size = 1
    while True:
        node = enc_unsigned(((size + len(lbytes)) << 2 | flags) if right else flags)
        if len(node) == size:
            return node + lbytes + rbytes
        size = len(node)


def enc_native_array(count: int, elements: dict[int, bytes], entry_size: int = 2) -> bytes:
    """A NativeArray of ``count`` slots holding ``elements`` (index -> element bytes)."""
    blocks = []
    for b in range((count + 15) // 16):
        items = {i - 16 * b: d for i, d in elements.items() if 16 * b <= i < 16 * b + 16}
        blocks.append(_subtree(items, 8) if items else enc_unsigned(16 << 2))
    code = {1: 0, 2: 1, 4: 2}[entry_size]
    header = enc_unsigned(count << 2 | code)
    fmt = {1: "<B", 2: "<H", 4: "<I"}[entry_size]
    index_size = entry_size * len(blocks)
    out = bytearray()
    offsets = []
    pos = index_size
    for blk in blocks:
        offsets.append(pos)
        pos += len(blk)
    index = b"".join(struct.pack(fmt, o) for o in offsets)
    out += header + index + b"".join(blocks)
    return bytes(out)


def enc_hashtable(buckets: list[list[tuple[int, bytes]]], entry_size: int = 2) -> bytes:
    """A NativeHashtable: ``buckets[b]`` holds (low hash byte, entry data) pairs.

    Bucket entries are the low hash byte and a 5-byte signed offset (relative to just
    after that byte) to the entry's data, which follows all buckets.
    """
    shift = (len(buckets) - 1).bit_length()
    assert len(buckets) == 1 << shift
    code = {1: 0, 2: 1, 4: 2}[entry_size]
    fmt = {1: "<B", 2: "<H", 4: "<I"}[entry_size]
    pos = entry_size * (len(buckets) + 1)  # offsets are relative to just after the header
    data_pos = pos + 6 * sum(len(b) for b in buckets)
    starts, entries, datas = [], bytearray(), bytearray()
    for bucket in buckets:
        starts.append(pos)
        for low, data in bucket:
            entries += bytes([low, 15]) + struct.pack("<i", data_pos + len(datas) - (pos + 1))
            datas += data
            pos += 6
    starts.append(pos)
    table = b"".join(struct.pack(fmt, s) for s in starts)
    return bytes([shift << 2 | code]) + table + bytes(entries) + bytes(datas)
