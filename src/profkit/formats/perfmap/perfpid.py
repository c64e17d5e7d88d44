"""Linux perf JIT maps (``/tmp/perf-PID.map``): read, model, write.

``START SIZE NAME`` per line with absolute addresses (spec §2.1). Writers disagree on
rendering: .NET through 7 prints ``%p`` as 16 uppercase digits (``00007F1484580018``),
.NET 8+ as ``0x7fb99c69d090``, CPython as plain lowercase (``7fec82b727e8``), and all of
them size as lowercase ``%x`` (spec §2.4, §2.6). The reader accepts all of these (see
:mod:`profkit.formats.perfmap._lines` for the exact grammar and where it differs from
perf's) and remembers the file's style so an unchanged map is rewritten byte for byte.
Names are bytes in the wild, not necessarily UTF-8: they decode with
``surrogateescape`` and encode back to the same bytes.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from profkit.errors import PerfMapFormatError
from profkit.formats.perfmap._io import read_input, write_atomic
from profkit.formats.perfmap._lines import (
    DOTNET8_STYLE,
    DOTNET_PAL_STYLE,
    PERF_STYLE,
    LineStyle,
    parse_lines,
    render_lines,
)


class PerfMapEntry(NamedTuple):
    """One symbol: absolute start address, size in bytes, name."""

    start: int
    size: int
    name: str


@dataclass
class PerfMap:
    """A perf-PID.map as columns, in file (JIT) order; duplicates and overlaps kept."""

    starts: np.ndarray
    sizes: np.ndarray
    #: A list, or the lazily decoded column the fast reader returns (decodes on access).
    names: Sequence[str]
    style: LineStyle = PERF_STYLE
    skipped: list[tuple[int, str]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.names)

    def entries(self) -> Iterator[PerfMapEntry]:
        """The entries in file order."""
        return map(PerfMapEntry, self.starts.tolist(), self.sizes.tolist(), self.names)

    @classmethod
    def from_entries(
        cls, entries: Iterable[PerfMapEntry | tuple[int, int, str]], style: LineStyle = PERF_STYLE
    ) -> PerfMap:
        """Build a map from (start, size, name) triples; values must fit in 64 bits."""
        items = list(entries)
        starts = np.array([e[0] for e in items], dtype=np.uint64)
        sizes = np.array([e[1] for e in items], dtype=np.uint64)
        return cls(starts, sizes, [e[2] for e in items], style)

    def writer_guess(self) -> str:
        """Which runtime most likely wrote this map, from its number style and names."""
        s = self.style
        if self.names and all(n.startswith("py::") for n in self.names[:50]):
            return "CPython -X perf"
        if s.address_width == 16 and s.address_upper:
            return ".NET runtime before .NET 8 (PAL %p)"
        if s.prefix.lower() == "0x":
            return ".NET 8+ runtime (glibc %p)" if s == DOTNET8_STYLE else "0x-prefixed writer"
        if s == PERF_STYLE:
            return "plain lowercase hex (perf's documented form)"
        return "other"


def read_perf_map(data: bytes, *, path: str | None = None, strict: bool = True) -> PerfMap:
    """Parse perf-PID.map bytes; ``strict=False`` skips and records broken lines."""
    parsed = parse_lines(data, path=path, strict=strict)
    return PerfMap(parsed.starts, parsed.sizes, parsed.names, parsed.style, parsed.skipped)


def write_perf_map(perfmap: PerfMap) -> bytes:
    """Render in the map's style (a map read from a file comes back byte-identical)."""
    return render_lines(perfmap.starts, perfmap.sizes, perfmap.names, perfmap.style)


def load_perf_map(path: str, *, strict: bool = True) -> PerfMap:
    """Read a perf map file (``-`` is stdin)."""
    return read_perf_map(read_input(path, PerfMapFormatError), path=path, strict=strict)


def save_perf_map(perfmap: PerfMap, path: str) -> None:
    """Write atomically (temp file in the same directory, then rename)."""
    write_atomic(path, write_perf_map(perfmap))


__all__ = [
    "DOTNET8_STYLE",
    "DOTNET_PAL_STYLE",
    "PERF_STYLE",
    "PerfMap",
    "PerfMapEntry",
    "load_perf_map",
    "read_perf_map",
    "save_perf_map",
    "write_perf_map",
]
