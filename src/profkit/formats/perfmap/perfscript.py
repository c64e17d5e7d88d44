"""Fill ``[unknown]`` frames of ``perf script`` text from perf maps.

``perf script`` prints each frame as ``<ip> <symbol> (<dso>)``, on the sample line or on
indented callchain lines, with ``[unknown]`` where it found no symbol — which is what
ReadyToRun code inside ``*.dll`` mappings looks like (spec §2.4, §4 item 1). We replace
exactly the ``[unknown]`` that follows an IP (hex, preceded by whitespace) when the
:class:`~profkit.formats.perfmap.symbolizer.Symbolizer` knows the IP, and leave every
other byte as it was. Input is processed in blocks of lines, so a multi-GB transcript
streams with bounded memory and one vectorized lookup per block.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np

from profkit.formats.perfmap.symbolizer import Symbolizer

_FRAME = re.compile(
    rb"(?:(?<=[ \t])|^)([0-9a-fA-F]{1,16}) \[unknown\](?=[ \t\r\n]|$)", re.MULTILINE
)
_UNKNOWN_LEN = len(b"[unknown]")
BLOCK_LINES = 65536
BLOCK_BYTES = 16 << 20


@dataclass
class SymbolizeStats:
    """How many ``[unknown]`` frames were seen and how many got a name."""

    unknown: int = 0
    resolved: int = 0


def symbolize_block(
    block: bytes, symbolizer: Symbolizer, stats: SymbolizeStats, *, offsets: bool = True
) -> bytes:
    """Return ``block`` with resolvable ``[unknown]`` frames named (``name+0xOFF``)."""
    matches = list(_FRAME.finditer(block))
    if not matches:
        return block
    stats.unknown += len(matches)
    addrs = np.fromiter((int(m.group(1), 16) for m in matches), dtype=np.uint64, count=len(matches))
    batch = symbolizer.lookup_many(addrs)
    entries = batch.entries.tolist()
    offs = batch.offsets.tolist()
    names: dict[int, bytes] = {}
    out: list[bytes] = []
    last = 0
    for m, entry, off in zip(matches, entries, offs, strict=True):
        if entry < 0:
            continue
        name = names.get(entry)
        if name is None:
            # only the name: symbol() would build the table's Python-list twins (six
            # lists as long as the maps, ~2x the time of a short transcript on a big map)
            name = symbolizer.name(entry).encode("utf-8", "surrogateescape")
            names[entry] = name
        sym_at = m.end() - _UNKNOWN_LEN
        out.append(block[last:sym_at])
        out.append(name + (b"+0x%x" % off if offsets else b""))
        last = m.end()
        stats.resolved += 1
    out.append(block[last:])
    return b"".join(out)


def symbolize_stream(
    lines: Iterable[bytes],
    symbolizer: Symbolizer,
    stats: SymbolizeStats,
    *,
    offsets: bool = True,
    block_lines: int = BLOCK_LINES,
) -> Iterator[bytes]:
    """Symbolize an iterable of lines (each with its newline), yielding output blocks of
    at most ``block_lines`` lines or about :data:`BLOCK_BYTES` (long lines must not turn
    a block into gigabytes)."""
    block: list[bytes] = []
    size = 0
    for line in lines:
        block.append(line)
        size += len(line)
        if len(block) >= block_lines or size >= BLOCK_BYTES:
            yield symbolize_block(b"".join(block), symbolizer, stats, offsets=offsets)
            block.clear()
            size = 0
    if block:
        yield symbolize_block(b"".join(block), symbolizer, stats, offsets=offsets)
