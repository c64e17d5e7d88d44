"""A tiny independent protobuf decoder for checking the pprof exporter (tests only)."""

from __future__ import annotations

from collections import defaultdict


def read_varint(data: bytes, pos: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def fields(data: bytes) -> dict[int, list[int | bytes]]:
    """Field number → values (ints for varints, bytes for length-delimited)."""
    out: dict[int, list[int | bytes]] = defaultdict(list)
    pos = 0
    while pos < len(data):
        tag, pos = read_varint(data, pos)
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            value, pos = read_varint(data, pos)
            out[number].append(value)
        elif wire == 2:
            length, pos = read_varint(data, pos)
            if pos + length > len(data):
                raise ValueError("length past end")
            out[number].append(data[pos : pos + length])
            pos += length
        else:
            raise ValueError(f"unexpected wire type {wire}")
    return out


def packed(values: list[int | bytes]) -> list[int]:
    """Packed repeated varints (also accepts the unpacked encoding)."""
    result: list[int] = []
    for v in values:
        if isinstance(v, int):
            result.append(v)
            continue
        pos = 0
        while pos < len(v):
            x, pos = read_varint(v, pos)
            result.append(x)
    return result


def one(msg: dict[int, list[int | bytes]], number: int, default: int = 0) -> int:
    values = msg.get(number, [])
    value = values[-1] if values else default
    assert isinstance(value, int)
    return value
