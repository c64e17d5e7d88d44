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


def _dso_of(block: bytes, end: int) -> bytes | None:
    """The ``(dso)`` text right after a frame's ``[unknown]`` (perf's last column)."""
    if block[end : end + 2] != b" (":
        return None
    eol = block.find(b"\n", end)
    if eol < 0:
        eol = len(block)
    close = block.rfind(b")", end, eol)
    return block[end + 2 : close] if close > end else None


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
    matches = list(_FRAME.finditer(block))
    if not matches:
        return block
    stats.unknown += len(matches)
    addrs = np.fromiter((int(m.group(1), 16) for m in matches), dtype=np.uint64, count=len(matches))
    batch = symbolizer.lookup_many(addrs)
    entries = batch.entries.tolist()
    offs = batch.offsets.tolist()
    # per frame: (symbolizer, entry) when named
    owner: list[Symbolizer | None] = [symbolizer if e >= 0 else None for e in entries]
    dsos: list[bytes | None] = []
    if images is not None or stats.per_dso is not None:
        dsos = [_dso_of(block, m.end()) for m in matches]
    if images is not None:
        groups: dict[bytes, list[int]] = {}
        for i, dso in enumerate(dsos):
            if dso is not None:
                groups.setdefault(dso, []).append(i)
        for dso, idx in groups.items():
            table = images(dso.decode("utf-8", "surrogateescape"))
            if table is None:
                continue
            rvas = table.rvas(addrs[idx])
            ok = rvas >= 0
            found = table.symbolizer.lookup_many(np.where(ok, rvas, 0).astype(np.uint64))
            for j, i in enumerate(idx):
                if ok[j] and found.entries[j] >= 0:
                    owner[i] = table.symbolizer
                    entries[i] = int(found.entries[j])
                    offs[i] = int(found.offsets[j])
    names: dict[tuple[int, int], bytes] = {}
    out: list[bytes] = []
    last = 0
    for i, (m, entry, off) in enumerate(zip(matches, entries, offs, strict=True)):
        sym = owner[i]
        if stats.per_dso is not None:
            key = (dsos[i] or b"").decode("utf-8", "surrogateescape")
            counts = stats.per_dso.setdefault(key, [0, 0])
            counts[0] += 1
            counts[1] += sym is not None
        if sym is None:
            continue
        name = names.get((id(sym), entry))
        if name is None:
            # only the name: symbol() would build the table's Python-list twins (six
            # lists as long as the maps, ~2x the time of a short transcript on a big map)
            name = sym.name(entry).encode("utf-8", "surrogateescape")
            names[(id(sym), entry)] = name
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
