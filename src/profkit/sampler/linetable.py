"""Line numbers from a code object's location table (``co_linetable``, CPython 3.11+).

Why decode it ourselves: the table lives in the *target's* memory, so
``code.co_positions()`` is not available; the format (Objects/locations.md in CPython)
is the same for 3.11, 3.12 and 3.13. Each entry covers ``(first & 7) + 1`` code units;
its code ``(first >> 3) & 15`` says how the line changes:

* 15: no location; 14: long form (signed varint line delta, then end line, columns);
* 13: no columns (signed varint line delta); 10–12: one-line form, delta ``code - 10``;
* 0–9: short form, same line.

A table read from a running process may be torn or hostile: decoding stops at the end
of the bytes and never raises.
"""

from __future__ import annotations


def _varint(table: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    n = len(table)
    while i < n:
        b = table[i]
        i += 1
        value |= (b & 63) << shift
        shift += 6
        if not b & 64:
            break
    return value, i


def _svarint(table: bytes, i: int) -> tuple[int, int]:
    value, i = _varint(table, i)
    return (-(value >> 1) if value & 1 else value >> 1), i


def line_for(table: bytes, first_line: int, offset: int) -> int:
    """The line of the instruction at code-unit index ``offset`` (``first_line`` if none)."""
    line = first_line
    unit = 0
    i = 0
    n = len(table)
    result = first_line
    while i < n:
        first = table[i]
        i += 1
        if not first & 0x80:
            continue  # not an entry start: a torn table; resynchronise
        code = (first >> 3) & 15
        length = (first & 7) + 1
        entry_line: int | None
        if code == 15:
            entry_line = None
        elif code == 14:
            delta, i = _svarint(table, i)
            line += delta
            entry_line = line
            for _ in range(3):  # end line, column, end column
                _, i = _varint(table, i)
        elif code == 13:
            delta, i = _svarint(table, i)
            line += delta
            entry_line = line
        elif code >= 10:
            line += code - 10
            entry_line = line
            i += 2
        else:
            entry_line = line
            i += 1
        if entry_line is not None:
            result = entry_line
        if unit <= offset < unit + length:
            return result if entry_line is None else entry_line
        unit += length
    return result
