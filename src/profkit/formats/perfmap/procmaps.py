"""``/proc/PID/maps`` text → where each R2R image is loaded.

An r2rmap holds RVAs from the image base; the process knows the base. On Linux CoreCLR
maps an R2R PE in pieces: one mapping at file offset 0 holding the DOS/NT headers,
then one per section (spec §1.8), so the image base is the start of the file's
offset-0 mapping and ``address = base + RVA``. When a file has several offset-0
mappings (a flat copy mapped for reading besides the loaded layout), the one followed
by an executable mapping of the same file wins, then the lowest.
"""

from __future__ import annotations

from typing import NamedTuple

from profkit.errors import PerfMapFormatError
from profkit.formats.perfmap._io import read_input


class Mapping(NamedTuple):
    """One line of ``/proc/PID/maps``."""

    start: int
    end: int
    perms: str
    offset: int
    path: str


def read_proc_maps(data: bytes, *, path: str | None = None, strict: bool = True) -> list[Mapping]:
    """Parse maps text; broken lines raise (``strict``) or are skipped."""
    out: list[Mapping] = []
    for lineno, raw in enumerate(data.decode("utf-8", "surrogateescape").splitlines(), 1):
        if not raw.strip():
            continue
        try:
            out.append(_parse(raw))
        except ValueError as exc:
            if strict:
                raise PerfMapFormatError("malformed", str(exc), path=path, line=lineno) from None
    return out


def _parse(line: str) -> Mapping:
    fields = line.split(None, 5)
    if len(fields) < 5:
        raise ValueError("expected 'start-end perms offset dev inode [path]'")
    lo, dash, hi = fields[0].partition("-")
    try:
        start, end, offset = int(lo, 16), int(hi, 16), int(fields[2], 16)
    except ValueError:
        raise ValueError(f"bad address range or offset in {line[:60]!r}") from None
    if not dash or max(start, end, offset) >= 1 << 64 or end < start:
        raise ValueError(f"bad address range {fields[0][:60]!r}")
    path = fields[5] if len(fields) > 5 else ""
    return Mapping(start, end, fields[1], offset, path.removesuffix(" (deleted)"))


def load_proc_maps(path: str, *, strict: bool = True) -> list[Mapping]:
    """Read a saved ``/proc/PID/maps`` (``-`` is stdin)."""
    return read_proc_maps(read_input(path, PerfMapFormatError), path=path, strict=strict)


def image_bases(mappings: list[Mapping]) -> dict[str, int]:
    """File path → image base (see the module doc for the rule)."""
    by_path: dict[str, list[Mapping]] = {}
    for m in mappings:
        if m.path.startswith("/"):
            by_path.setdefault(m.path, []).append(m)
    bases: dict[str, int] = {}
    for file, maps in by_path.items():
        maps.sort(key=lambda m: m.start)
        heads = [i for i, m in enumerate(maps) if m.offset == 0]
        if not heads:
            continue
        best = heads[0]
        for i in heads:
            nxt = heads[heads.index(i) + 1] if i != heads[-1] else len(maps)
            if any("x" in m.perms for m in maps[i:nxt]):
                best = i
                break
        bases[file] = maps[best].start
    return bases


def image_stem(file_path: str) -> str:
    """``/x/System.Private.CoreLib.dll`` → ``system.private.corelib`` (for matching to maps)."""
    name = file_path.replace("\\", "/").rsplit("/", 1)[-1]
    for ext in (".dll", ".exe", ".so", ".r2r"):
        if name.lower().endswith(ext):
            return name[: -len(ext)].lower()
    return name.lower()
