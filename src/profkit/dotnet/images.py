"""Naming addresses in precompiled (ReadyToRun) framework code the runtime did not name.

The runtime's method events cover JIT-compiled code, and its rundown covers the
precompiled methods it has prepared; a sample can still land in R2R code it never
listed (a session whose target exited before its rundown, code reached by a direct call).
Such an address lies in a mapped image: CoreCLR on Linux maps each PE section at
``base + RVA``, so ``/proc/PID/maps`` gives the base (the mapping at file offset 0) and the
image's own method table (profkit's R2R reader, cached by image) names the RVA.

The maps are read while the target lives (:meth:`MappedImages.refresh`): after it exits
they are gone. Images are only read when an address falls inside them, once each.
"""

from __future__ import annotations

import bisect
import os

from profkit.dotnet.methods import MethodTable, r2r_method_name
from profkit.errors import ProfkitError


class _Image:
    """One image's method bodies, sorted by RVA (loaded on first use)."""

    def __init__(self, path: str, base: int) -> None:
        self.path = path
        self.base = base
        self.loaded = False
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.names: list[str] = []

    def _load(self) -> None:
        self.loaded = True
        from profkit.formats.r2r import NotReadyToRunError
        from profkit.formats.r2r.imagemaps import ImageMaps, default_cache_dir

        try:
            table = ImageMaps(cache_dir=default_cache_dir()).table(self.path)
        except (NotReadyToRunError, ProfkitError, OSError, ValueError):
            return
        if table is None:
            return
        rows = sorted(
            zip(
                table.perfmap.rvas.tolist(),
                table.perfmap.lengths.tolist(),
                table.perfmap.names,
                strict=True,
            )
        )
        self.starts = [int(r) for r, _, _ in rows]
        self.ends = [int(r) + int(n) for r, n, _ in rows]
        self.names = [name for _, _, name in rows]

    def lookup(self, ip: int) -> str | None:
        if not self.loaded:
            self._load()
        rva = ip - self.base
        i = bisect.bisect_right(self.starts, rva) - 1
        if i >= 0 and rva < self.ends[i]:
            return r2r_method_name(self.names[i])
        return None


class MappedImages:
    """The ``.dll`` images mapped in a process: path -> (base, end)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.ranges: dict[str, tuple[int, int]] = {}

    def refresh(self) -> None:
        """Read the process's maps again (new images appear as the program loads them)."""
        try:
            with open(f"/proc/{self.pid}/maps") as fh:
                text = fh.read()
        except OSError:
            return
        for line in text.splitlines():
            parts = line.split(None, 5)
            if len(parts) < 6 or not parts[5].lower().endswith(".dll"):
                continue
            path = parts[5].strip()
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            base, end = self.ranges.get(path, (lo, hi))
            self.ranges[path] = (min(base, lo), max(end, hi))  # the lowest: file offset 0

    def attach_to(self, table: MethodTable) -> None:
        """Let ``table`` fall back on these images for addresses no event named."""
        for path, (base, end) in self.ranges.items():
            if os.path.isfile(path):
                table.add_image(base, end, _Image(path, base).lookup)
