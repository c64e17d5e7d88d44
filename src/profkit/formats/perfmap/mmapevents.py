"""Image load bases from the MMAP events in ``perf script --show-mmap-events`` text.

``perf record`` logs every executable mapping, e.g.
``PERF_RECORD_MMAP2 4242/4242: [0x7f1f869e3000(0x1000) @ 0x1000 fe:00 2204089 0]: r-xp /x/A.dll``.
By default only executable mappings are recorded, so for an R2R image perf sees the
``.text`` mapping, not the header mapping at file offset 0. The base then follows from
the image's own section table (spec §1.8): the section holding file offset ``pgoff`` has
RVA ``va`` at file offset ``raw``, so ``base = start - (va + pgoff - raw)``. This needs
the image file; it is read from the recorded path or from an ``--image-dir``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from typing import NamedTuple

from profkit.errors import ProfkitError
from profkit.formats.perfmap._io import iter_lines
from profkit.formats.perfmap.pe import PEImage, load_pe

_EVENT = re.compile(
    rb"PERF_RECORD_MMAP2? (-?\d+)/(-?\d+): \[0x([0-9a-fA-F]+)\(0x([0-9a-fA-F]+)\) "
    rb"@ (0x[0-9a-fA-F]+|\d+)[^\]]*\]: (\S+) (.*?)\r?$",
    re.MULTILINE,
)


class MmapEvent(NamedTuple):
    """One executable mapping perf recorded."""

    pid: int
    start: int
    length: int
    pgoff: int
    prot: str
    path: str


def parse_mmap_events(text: bytes) -> list[MmapEvent]:
    """Every MMAP/MMAP2 event line in ``text`` (other lines are ignored)."""
    events = []
    for m in _EVENT.finditer(text):
        pgoff = m.group(5)
        events.append(
            MmapEvent(
                int(m.group(1)),
                int(m.group(3), 16),
                int(m.group(4), 16),
                int(pgoff, 16) if pgoff.startswith(b"0x") else int(pgoff),
                m.group(6).decode("ascii", "replace"),
                m.group(7).decode("utf-8", "surrogateescape"),
            )
        )
    return events


def load_mmap_events(path: str) -> list[MmapEvent]:
    """The MMAP events of a ``perf script --show-mmap-events`` file, read line by line."""
    events: list[MmapEvent] = []
    try:
        with open(path, "rb") as fh:
            for line in iter_lines(fh):
                if b"PERF_RECORD_MMAP" in line:
                    events.extend(parse_mmap_events(line))
    except OSError as exc:
        raise ProfkitError(f"{path}: cannot read: {exc.strerror or exc}") from None
    return events


def image_base(event: MmapEvent, image: PEImage) -> int | None:
    """The load base implied by ``event`` for ``image``, or None if no section matches."""
    if event.pgoff == 0:
        return event.start
    for s in image.sections:
        if s.raw_pointer <= event.pgoff < s.raw_pointer + s.raw_size:
            base = event.start - (s.virtual_address + event.pgoff - s.raw_pointer)
            return base if base >= 0 else None
    return None


def image_finder(image_dirs: Iterable[str]) -> Callable[[str], PEImage | None]:
    """A cached ``path -> PEImage`` that also tries each ``image_dirs/<basename>``.

    Files that are missing or not PE images yield None (an MMAP event names every
    mapped file; only the ones that are images matter).
    """
    dirs = list(image_dirs)
    cache: dict[str, PEImage | None] = {}

    def find(path: str) -> PEImage | None:
        if path in cache:
            return cache[path]
        name = os.path.basename(path)
        image = None
        for candidate in [*(os.path.join(d, name) for d in dirs), path]:
            if os.path.isfile(candidate):
                try:
                    image = load_pe(candidate)
                    break
                except ProfkitError:
                    continue
        cache[path] = image
        return image

    return find
