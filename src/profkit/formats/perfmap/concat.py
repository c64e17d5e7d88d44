"""R2R maps placed at their load bases and concatenated into perf-PID.map lines.

Why a module of its own: ``perfmap convert`` turns one or more .r2rmap files (RVAs) into
the absolute-address lines ``perf`` reads, optionally after the lines of an existing
map (``--append``), in that map's own style. Placing, prefixing, the 64-bit bound and the
style rule are the format's business; the command only finds the bases and the bytes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from profkit.errors import UsageError
from profkit.formats.perfmap._lines import PERF_STYLE, render_lines
from profkit.formats.perfmap.perfpid import read_perf_map
from profkit.formats.perfmap.r2rmap import R2RPerfMap

#: perf ignores symbol lines whose name is shorter than this.
MIN_NAME_CHARS = 3


@dataclass(frozen=True)
class PlacedMap:
    """One r2rmap's entries at absolute addresses."""

    starts: np.ndarray
    sizes: np.ndarray
    names: list[str]


def place_r2rmap(m: R2RPerfMap, base: int, path: str, prefix: str = "") -> PlacedMap:
    """``m``'s entries at load ``base``, names after ``prefix`` (``"[Assembly] "`` as the
    runtime's own perf map writes them); a base that pushes an entry past 2**64 is refused."""
    if len(m) and base + int(m.rvas.max()) >= 1 << 64:
        raise UsageError(f"{path}: base 0x{base:x} puts the map past the 64-bit space")
    names = [prefix + n for n in m.names] if prefix else list(m.names)
    return PlacedMap(m.rvas + np.uint64(base), m.lengths, names)


def short_names(placed: Sequence[PlacedMap]) -> int:
    """How many names perf will ignore (shorter than :data:`MIN_NAME_CHARS`)."""
    return sum(1 for p in placed for n in p.names if len(n) < MIN_NAME_CHARS)


def concat_maps(
    placed: Sequence[PlacedMap], existing: bytes = b"", existing_path: str = ""
) -> bytes:
    """The perf map: ``existing`` lines first (kept byte for byte, a missing final newline
    added), then every placed entry in order, in the existing map's style (else perf's)."""
    style = PERF_STYLE
    if existing:
        style = read_perf_map(existing, path=existing_path, strict=False).style
        style = dataclasses.replace(style, final_newline=True)
        if not existing.endswith(b"\n"):
            existing += style.newline.encode()
    starts = np.concatenate([p.starts for p in placed])
    sizes = np.concatenate([p.sizes for p in placed])
    names = [n for p in placed for n in p.names]
    return existing + render_lines(starts, sizes, names, style)
