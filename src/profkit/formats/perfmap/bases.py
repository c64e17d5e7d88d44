"""Which load base belongs to which r2rmap: explicit, from perfinfo, or from /proc maps.

An r2rmap is named after its image (``System.Private.CoreLib.ni.r2rmap`` ↔
``.../System.Private.CoreLib.dll``, spec §1.2), so bases are matched by the image's
file-name stem, case-insensitively. Explicit ``NAME=ADDR`` bases win over discovered
ones; a bare ``ADDR`` applies when exactly one r2rmap is being placed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from profkit.errors import UsageError
from profkit.formats.perfmap.mmapevents import MmapEvent, image_base
from profkit.formats.perfmap.pe import PEImage
from profkit.formats.perfmap.perfinfo import PerfInfo
from profkit.formats.perfmap.procmaps import Mapping, image_bases, image_stem
from profkit.formats.perfmap.r2rmap import parse_r2rmap_file_name

U64_MAX = (1 << 64) - 1


def parse_address(text: str, what: str = "address") -> int:
    """Hex with or without ``0x`` (perf's convention); UsageError if it is not one."""
    digits = text[2:] if text[:2].lower() == "0x" else text
    if not digits or len(digits) > 64 or any(c not in "0123456789abcdefABCDEF" for c in digits):
        raise UsageError(f"{what} {text[:40]!r} is not a hex number")
    value = int(digits, 16)
    if value > U64_MAX:
        raise UsageError(f"{what} {text[:40]!r} does not fit in 64 bits")
    return value


def map_stem(map_path: str) -> str:
    """The lower-case image stem an r2rmap's file name refers to."""
    parsed = parse_r2rmap_file_name(map_path)
    if parsed is not None:
        return parsed.base.lower()
    return image_stem(map_path.rsplit(".", 1)[0])


def _name_key(name: str) -> str:
    """The image stem a ``--base NAME=`` names: a map's file name (``X.ni.r2rmap``), an
    image's (``X.dll``) or the assembly name itself (``System.Private.CoreLib``: its dots
    are part of the name, not an extension to strip)."""
    parsed = parse_r2rmap_file_name(name)
    return parsed.base.lower() if parsed is not None else image_stem(name)


@dataclass
class BaseResolver:
    """Collects candidate bases, then answers :meth:`base_for` one map at a time."""

    default: int | None = None
    explicit: dict[str, int] = field(default_factory=dict)
    found: dict[str, dict[int, str]] = field(default_factory=dict)

    def add_option(self, text: str) -> None:
        """One ``--base`` value: ``ADDR`` or ``NAME=ADDR``."""
        name, eq, addr = text.rpartition("=")
        if eq:
            if not name.strip():
                raise UsageError(f"--base {text!r}: no image name before '='")
            self.explicit[_name_key(name)] = parse_address(addr, "base")
        elif self.default is not None:
            raise UsageError("give at most one bare --base; use NAME=ADDR for several maps")
        else:
            self.default = parse_address(addr, "base")

    def add_perfinfo(self, info: PerfInfo, origin: str) -> None:
        """Bases of R2R images (non-zero ``ImageLoad`` bases)."""
        for record in info.image_loads():
            if record.base:
                self._found(image_stem(record.path), record.base, f"{origin}: {record.path}")

    def add_proc_maps(self, mappings: list[Mapping], origin: str) -> None:
        """Bases of every file mapped at offset 0."""
        for path, base in image_bases(mappings).items():
            self._found(image_stem(path), base, f"{origin}: {path}")

    def add_mmap_events(
        self,
        events: list[MmapEvent],
        find_image: Callable[[str], PEImage | None],
        wanted: set[str],
        origin: str,
    ) -> None:
        """Bases of the ``wanted`` image stems from perf's MMAP events (+ the image files)."""
        for event in events:
            stem = image_stem(event.path)
            if stem not in wanted or "x" not in event.prot:
                continue
            image = find_image(event.path)
            if image is None:
                continue
            base = image_base(event, image)
            if base is not None:
                self._found(stem, base, f"{origin}: pid {event.pid} {event.path}")

    def _found(self, stem: str, base: int, how: str) -> None:
        self.found.setdefault(stem, {}).setdefault(base, how)

    def base_for(self, map_path: str, *, only_map: bool) -> tuple[int, str]:
        """(base, how it was found) for ``map_path``; UsageError when unknown or ambiguous."""
        stem = map_stem(map_path)
        if stem in self.explicit:
            return self.explicit[stem], "--base"
        if self.default is not None and only_map:
            return self.default, "--base"
        candidates = self.found.get(stem, {})
        if len(candidates) == 1:
            ((base, how),) = candidates.items()
            return base, how
        if len(candidates) > 1:
            shown = ", ".join(f"{b:#x}" for b in sorted(candidates))
            raise UsageError(
                f"{map_path}: several load bases for '{stem}' ({shown}); "
                f"pick one with --base {stem}=0x..."
            )
        if self.default is not None:
            raise UsageError("a bare --base needs exactly one r2rmap; use NAME=ADDR")
        raise UsageError(
            f"{map_path}: no load base for image '{stem}'; "
            "give --base 0x..., --perfinfo perfinfo-PID.map, --proc-maps FILE or "
            "--mmap-events FILE (perf script --show-mmap-events)"
        )
