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
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Protocol

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
    """How many ``[unknown]`` frames were seen and how many got a name.

    ``per_dso`` (filled when not None) counts, per DSO text in the frame's
    ``(...)``, ``[seen, named]``: what ``--stats`` reports per image.
    """

    unknown: int = 0
    resolved: int = 0
    per_dso: dict[str, list[int]] | None = field(default=None)


class ImageLookup(Protocol):
    """One image's table (see :class:`profkit.formats.r2r.imagemaps.ImageTable`)."""

    symbolizer: Symbolizer

    def rvas(self, addresses: np.ndarray) -> np.ndarray: ...


#: DSO path → the image's table, or None when the DSO is not an image we can read.
ImageFinder = Callable[[str], ImageLookup | None]


#: The same frame, also capturing the ``(dso)`` perf prints after it (its last column).
_FRAME_DSO = re.compile(
    rb"(?:(?<=[ \t])|^)([0-9a-fA-F]{1,16}) \[unknown\](?=[ \t\r\n]|$)(?: \(([^\r\n]*)\))?",
    re.MULTILINE,
)


def symbolize_block(
    block: bytes,
    symbolizer: Symbolizer,
    stats: SymbolizeStats,
    *,
    offsets: bool = True,
    images: ImageFinder | None = None,
) -> bytes:
    """Return ``block`` with resolvable ``[unknown]`` frames named (``name+0xOFF``).

    With ``images``, a frame whose DSO is an R2R image is looked up in that image's
    own table (absolute or DSO-relative address, see ``profkit.formats.r2r.imagemaps``)
    before the address-space-wide ``symbolizer``.
    """
    by_dso = images is not None or stats.per_dso is not None
    matches = list((_FRAME_DSO if by_dso else _FRAME).finditer(block))
    if not matches:
        return block
    stats.unknown += len(matches)
    addrs = np.fromiter((int(m.group(1), 16) for m in matches), dtype=np.uint64, count=len(matches))
    batch = symbolizer.lookup_many(addrs)
    entries = batch.entries.copy()
    offs = batch.offsets.copy()
    # which symbolizer named each frame: 0 = the address-space one, k = tables[k-1], -1 none
    owner = np.where(entries >= 0, 0, -1)
    tables: list[Symbolizer] = [symbolizer]
    if by_dso:
        groups: dict[bytes | None, list[int]] = {}
        for i, m in enumerate(matches):
            groups.setdefault(m.group(2), []).append(i)
        for dso, members in groups.items():
            idx = np.array(members, dtype=np.int64)
            table = images(dso.decode("utf-8", "surrogateescape")) if images and dso else None
            if table is not None:
                rvas = table.rvas(addrs[idx])
                ok = rvas >= 0
                found = table.symbolizer.lookup_many(np.where(ok, rvas, 0).astype(np.uint64))
                hit = ok & (found.entries >= 0)
                tables.append(table.symbolizer)
                entries[idx[hit]] = found.entries[hit]
                offs[idx[hit]] = found.offsets[hit]
                owner[idx[hit]] = len(tables) - 1
            if stats.per_dso is not None:
                key = (dso or b"").decode("utf-8", "surrogateescape")
                counts = stats.per_dso.setdefault(key, [0, 0])
                counts[0] += len(members)
                counts[1] += int((owner[idx] >= 0).sum())
    names: dict[tuple[int, int], bytes] = {}
    out: list[bytes] = []
    last = 0
    for m, k, entry, off in zip(matches, owner.tolist(), entries.tolist(), offs.tolist(),
                                strict=True):  # fmt: skip
        if k < 0:
            continue
        name = names.get((k, entry))
        if name is None:
            # only the name: symbol() would build the table's Python-list twins (six
            # lists as long as the maps, ~2x the time of a short transcript on a big map)
            name = tables[k].name(entry).encode("utf-8", "surrogateescape")
            names[(k, entry)] = name
        sym_at = m.end(1) + 1
        out.append(block[last:sym_at])
        out.append(name + (b"+0x%x" % off if offsets else b""))
        last = sym_at + _UNKNOWN_LEN
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
    images: ImageFinder | None = None,
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
            yield symbolize_block(
                b"".join(block), symbolizer, stats, offsets=offsets, images=images
            )
            block.clear()
            size = 0
    if block:
        yield symbolize_block(b"".join(block), symbolizer, stats, offsets=offsets, images=images)
