"""Image bases from perf's MMAP events plus the image's section table."""

from __future__ import annotations

from profkit.formats.perfmap.bases import BaseResolver
from profkit.formats.perfmap.mmapevents import (
    MmapEvent,
    image_base,
    image_finder,
    parse_mmap_events,
)
from profkit.formats.perfmap.pe import read_pe

from .conftest import FIXTURES

DLL = FIXTURES / "MinimalR2R.dll"

TEXT = b"""\
         swapper     0     0.000000: PERF_RECORD_MMAP -1/0: [0xffffffff81000000(0x1276508) @ 0xffffffff81000000]: x [kernel.kallsyms]_text
          python 31202  2124.480147: PERF_RECORD_MMAP2 31202/31202: [0x55bfdc5a4000(0x6000) @ 0x2000 fe:00 260257 0]: r-xp /usr/bin/env
          python 31202  2124.480171: PERF_RECORD_MMAP2 31202/31202: [0x7f796a21a000(0x2000) @ 0 00:00 0 0]: r-xp [vdso]
          python 31202  2124.732538: PERF_RECORD_MMAP2 31202/31202: [0x7f1f869e3000(0x1000) @ 0x1000 fe:00 2204089 666583730]: r-xp /gone/My App/MinimalR2R.dll
          python 31202  2124.737323:     250000 cpu-clock:      7f1f869e3255 [unknown] (/gone/My App/MinimalR2R.dll)
"""


def test_parse() -> None:
    events = parse_mmap_events(TEXT)
    assert len(events) == 4
    assert events[0] == MmapEvent(-1, 0xFFFFFFFF81000000, 0x1276508, 0xFFFFFFFF81000000, "x",
                                  "[kernel.kallsyms]_text")  # fmt: skip
    assert events[2].pgoff == 0 and events[2].path == "[vdso]"
    assert events[3] == MmapEvent(31202, 0x7F1F869E3000, 0x1000, 0x1000, "r-xp",
                                  "/gone/My App/MinimalR2R.dll")  # fmt: skip


def test_base_from_text_section() -> None:
    image = read_pe(DLL.read_bytes())
    text_event = parse_mmap_events(TEXT)[3]
    assert image_base(text_event, image) == 0x7F1F869E3000 - 0x2000  # .text: RVA 0x2000 @ 0x1000
    assert image_base(text_event._replace(pgoff=0), image) == 0x7F1F869E3000
    assert image_base(text_event._replace(pgoff=0x100000), image) is None


def test_resolver_uses_image_dir() -> None:
    r = BaseResolver()
    find = image_finder([str(FIXTURES)])
    r.add_mmap_events(parse_mmap_events(TEXT), find, {"minimalr2r"}, "s.txt")
    base, how = r.base_for("MinimalR2R.ni.r2rmap", only_map=True)
    assert base == 0x7F1F869E1000 and "pid 31202" in how
    assert image_finder([])("/gone/My App/MinimalR2R.dll") is None
