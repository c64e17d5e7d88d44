"""pprof (``go tool pprof``, Pyroscope, Grafana): gzipped protobuf ``profile.proto``.

Written by hand (a varint encoder and four message builders) so profkit needs no
protobuf package. Field numbers are those of google/pprof ``proto/profile.proto``:
Profile{1 sample_type, 2 sample, 4 location, 5 function, 6 string_table, 9 time_nanos,
10 duration_nanos, 11 period_type, 12 period, 14 default_sample_type},
ValueType{1 type, 2 unit}, Sample{1 location_id (packed, leaf first), 2 value (packed),
3 label}, Label{1 key, 2 str, 3 num}, Location{1 id, 4 line}, Line{1 function_id, 2 line},
Function{1 id, 2 name, 3 system_name, 4 filename, 5 start_line}.

Each call path becomes one sample with two values: ``calls`` (count) and ``time``
(self nanoseconds), labelled with its thread's name (and OS thread id and pid when
known), so pprof's cumulative view gives back the inclusive times.
"""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from typing import TypeGuard

from profkit.calltree.model import CallNode, CallProfile, ThreadTree
from profkit.errors import ProfkitError
from profkit.report.tree import total_ns, walk_stack

_INT64_MAX = (1 << 63) - 1
#: Most stack entries written over all samples: each sample repeats its whole stack, so
#: a deep recursion makes the file quadratic in depth.
MAX_STACK_ENTRIES = 100_000_000


def _check_size(profile: CallProfile) -> None:
    """Refuse, before any work, a profile whose samples would hold too many entries."""
    entries = 0
    for thread in profile.threads:
        for node, path in walk_stack(thread.root):
            if node.calls or node.exclusive_ns:
                entries += len(path) + 1
    if entries > MAX_STACK_ENTRIES:
        raise ProfkitError(
            f"pprof output would hold {entries:,} stack entries (every sample repeats its "
            f"whole stack; the limit is {MAX_STACK_ENTRIES:,}): export to speedscope or "
            "html instead, which stay proportional to the profile"
        )


def varint(value: int) -> bytes:
    """Protobuf base-128 varint; negative int64 values use their 64-bit two's complement."""
    if 0 <= value < _SMALL:
        return _SMALL_VARINTS[value]
    return _varint(value)


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_SMALL = 1 << 14
_SMALL_VARINTS = [_varint(v) for v in range(_SMALL)]  # every one- and two-byte varint


def _int(field: int, value: int) -> bytes:
    return varint(field << 3) + varint(value) if value else b""


def _bytes(field: int, data: bytes) -> bytes:
    return varint(field << 3 | 2) + varint(len(data)) + data


def _packed(field: int, values: list[int]) -> bytes:
    return _bytes(field, b"".join(varint(v) for v in values)) if values else b""


class _Strings:
    """The profile's string table; index 0 must be the empty string."""

    def __init__(self) -> None:
        self.table: list[str] = [""]
        self.index: dict[str, int] = {"": 0}

    def __call__(self, text: str) -> int:
        found = self.index.get(text)
        if found is None:
            found = self.index[text] = len(self.table)
            self.table.append(text)
        return found


def _samples(root: CallNode, encoded: list[bytes], label: bytes) -> Iterator[bytes]:
    """One Sample message per call path with calls or time, its locations leaf first.

    Each node's packed location list is its frame's varint followed by its parent's
    list (one bytes concatenation, not a Python loop over the stack per sample).
    """
    stack: list[tuple[CallNode, bytes]] = [(c, b"") for c in root.children.values()]
    pop, push = stack.pop, stack.append
    sample_tag, locations_tag, values_tag = (
        varint(2 << 3 | 2),
        varint(1 << 3 | 2),
        varint(2 << 3 | 2),
    )
    v = varint
    while stack:
        node, above = pop()
        locations = encoded[node.frame] + above
        if node.calls or node.exclusive_ns:
            values = v(node.calls) + v(node.exclusive_ns)
            body = b"".join(
                (
                    locations_tag,
                    v(len(locations)),
                    locations,
                    values_tag,
                    v(len(values)),
                    values,
                    label,
                )
            )
            yield sample_tag + v(len(body)) + body
        for child in node.children.values():
            push((child, locations))


def encode(profile: CallProfile) -> bytes:
    """The uncompressed ``Profile`` message."""
    s = _Strings()
    parts: list[bytes] = []

    def value_type(field: int, type_: str, unit: str) -> bytes:
        return _bytes(field, _int(1, s(type_)) + _int(2, s(unit)))

    time_name = "time" if profile.mode == "trace" else "wall"
    count_name, unit, period = "calls", "nanoseconds", profile.metadata.get("interval_ns")
    if profile.mode == "memory":
        # pprof's heap names: bytes allocated, or bytes in use (the peak or the end)
        alloc = profile.metadata.get("metric", "alloc_bytes") == "alloc_bytes"
        time_name = "alloc_space" if alloc else "inuse_space"
        count_name, unit = "samples", "bytes"
        period = profile.metadata.get("alloc_sample_bytes")
    parts.append(value_type(1, count_name, "count"))
    parts.append(value_type(1, time_name, unit))
    _check_size(profile)
    encoded = [varint(i + 1) for i in range(len(profile.frames))]
    for thread in profile.threads:
        parts.extend(_samples(thread.root, encoded, _thread_labels(thread, s)))
    for index, frame in enumerate(profile.frames):
        line = _bytes(4, _int(1, index + 1) + _int(2, frame.line))
        parts.append(_bytes(4, _int(1, index + 1) + line))
    for index, frame in enumerate(profile.frames):
        name = s(frame.name)
        body = (
            _int(1, index + 1)
            + _int(2, name)
            + _int(3, name)
            + _int(4, s(frame.file))
            + _int(5, frame.line)
        )
        parts.append(_bytes(5, body))
    start = profile.metadata.get("start_time_ns")
    tail = b""
    if _int64(start):
        tail += _int(9, start)
    # a root's total is a sum of children when unknown: it may pass int64, so clamp
    tail += _int(10, min(max((total_ns(t.root) for t in profile.threads), default=0), _INT64_MAX))
    tail += value_type(11, "space" if unit == "bytes" else time_name, unit)
    tail += _int(12, period if _int64(period) else 1)
    tail += _int(14, s(time_name))
    # the string table must be written after every s() call above
    # pprof strings must be UTF-8: a lone surrogate (non-UTF-8 file name) is written escaped
    strings = b"".join(_bytes(6, text.encode("utf-8", "backslashreplace")) for text in s.table)
    return b"".join(parts) + strings + tail


def _thread_labels(thread: ThreadTree, s: _Strings) -> bytes:
    """A sample's labels: ``thread`` (its name), and the OS thread id (``tid``) and
    process id (``pid``) as numbers when the profile recorded them (``pprof -tagfocus``,
    Pyroscope's label filters)."""
    out = _bytes(3, _int(1, s("thread")) + _int(2, s(thread.name)))
    for key, number in (("tid", thread.native_id), ("pid", thread.pid)):
        if _int64(number):
            out += _bytes(3, _int(1, s(key)) + _int(3, number))
    return out


def _int64(value: object) -> TypeGuard[int]:
    """A metadata value usable as a positive int64 field (metadata is free-form: a
    hand-edited 2**70 must not be silently cut to 64 bits and come out negative)."""
    return type(value) is int and 0 < value <= _INT64_MAX


def write(profile: CallProfile) -> bytes:
    """The profile as a gzipped pprof file."""
    data = encode(profile)
    # level 1 for big profiles: level 6 took longer than all the rest of the export
    return gzip.compress(data, compresslevel=6 if len(data) < 8 << 20 else 1, mtime=0)
