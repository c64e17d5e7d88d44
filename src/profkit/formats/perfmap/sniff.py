"""Which file of the perf-map family some bytes are, decided in one place.

Why a module of its own: ``perfmap show`` takes any of four kinds (an R2R image, a .NET
perfinfo-PID.map, an .r2rmap, a perf-PID.map) and ``lookup``/``symbolize`` any map; the
rules (the ``MZ`` magic, the ``ImageLoad;`` record or a ``perfinfo-`` name, the r2rmap
header line or file name, else a perf map) were written into the command beside the
formatting. Nothing here reads a file: the caller hands in its bytes and its name.
"""

from __future__ import annotations

import os
from typing import Literal

from profkit.formats.perfmap.perfpid import PerfMap, read_perf_map
from profkit.formats.perfmap.r2rmap import R2RPerfMap, looks_like_r2rmap, read_r2rmap

MapKind = Literal["image", "perfinfo", "r2rmap", "perf_map"]


def sniff(data: bytes, path: str) -> MapKind:
    """What ``data`` (the file ``path``) is: a PE image, a perfinfo map, an r2rmap, or
    else a perf map (the format with no signature, so the one left)."""
    if data[:2] == b"MZ":
        return "image"
    if data.startswith(b"ImageLoad;") or os.path.basename(path).startswith("perfinfo-"):
        return "perfinfo"
    if looks_like_r2rmap(data, path):
        return "r2rmap"
    return "perf_map"


def read_any_map(data: bytes, path: str, *, strict: bool = True) -> R2RPerfMap | PerfMap:
    """An r2rmap (by its header line or file name), or else a perf map: the maps that
    resolve addresses (``lookup``, ``symbolize --map``)."""
    if looks_like_r2rmap(data, path):
        return read_r2rmap(data, path=path, strict=strict)
    return read_perf_map(data, path=path, strict=strict)
