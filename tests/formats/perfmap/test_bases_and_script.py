"""Load-base resolution for r2rmaps, and perf-script symbolization across blocks."""

from __future__ import annotations

import pytest

from profkit.errors import UsageError
from profkit.formats.perfmap.bases import BaseResolver, map_stem, parse_address
from profkit.formats.perfmap.perfinfo import read_perfinfo
from profkit.formats.perfmap.perfpid import PerfMap
from profkit.formats.perfmap.perfscript import SymbolizeStats, symbolize_stream
from profkit.formats.perfmap.procmaps import read_proc_maps
from profkit.formats.perfmap.symbolizer import Symbolizer


def test_map_stems() -> None:
    assert map_stem("/x/System.Private.CoreLib.ni.r2rmap") == "system.private.corelib"
    assert map_stem("Foo.ni.{99d3f272-c6a8-429b-a694-647a7912d178}.map") == "foo"
    assert map_stem("framework-r2r.ni.{composite}.map") == "framework-r2r"


def test_parse_address() -> None:
    assert parse_address("0x10") == parse_address("10") == 16
    for bad in ("", "0x", "12g", "-1", "1" * 17):
        with pytest.raises(UsageError):
            parse_address(bad)


def test_resolution_order_and_ambiguity() -> None:
    r = BaseResolver()
    r.add_perfinfo(
        read_perfinfo(
            b"ImageLoad;/a/Foo.dll;{2C3F4D7E-1A2B-4C5D-8E9F-0A1B2C3D4E5F};0x7f0000000000;\n"
            b"ImageLoad;/a/Bar.dll;{2C3F4D7E-1A2B-4C5D-8E9F-0A1B2C3D4E50};0;\n"
        ),
        "perfinfo",
    )
    r.add_proc_maps(
        read_proc_maps(b"7f1000000000-7f1000001000 r--p 00000000 08:01 1 /b/Foo.dll\n"), "maps"
    )
    with pytest.raises(UsageError, match="several load bases"):
        r.base_for("Foo.ni.r2rmap", only_map=True)
    with pytest.raises(UsageError, match="no load base"):
        r.base_for("Bar.ni.r2rmap", only_map=True)  # base 0 = not an R2R image
    r.add_option("Foo=0x7f2000000000")
    assert r.base_for("Foo.ni.r2rmap", only_map=False) == (0x7F2000000000, "--base")
    r.add_option("0x5000")
    assert r.base_for("Bar.ni.r2rmap", only_map=True)[0] == 0x5000
    with pytest.raises(UsageError, match="at most one bare"):
        r.add_option("0x6000")


@pytest.mark.parametrize(
    "name",
    [
        "System.Private.CoreLib",
        "system.private.corelib",
        "System.Private.CoreLib.dll",
        "System.Private.CoreLib.ni.r2rmap",
        "/x/System.Private.CoreLib.r2rmap",
    ],
)
def test_base_option_names_with_dots(name: str) -> None:
    """``--base System.Private.CoreLib=0x…`` (also what the "several bases" error tells the
    user to type) lost its last dotted part and matched no map."""
    r = BaseResolver()
    r.add_option(f"{name}=0x7f3000000000")
    assert r.base_for("System.Private.CoreLib.ni.r2rmap", only_map=False)[0] == 0x7F3000000000


def test_base_option_with_an_empty_name_is_refused() -> None:
    """``--base =0x1000`` was taken as the base of an image named '' (matching nothing)."""
    with pytest.raises(UsageError, match="no image name"):
        BaseResolver().add_option("=0x1000")


def test_stream_blocks_give_the_same_text() -> None:
    sym = Symbolizer()
    sym.add_perf_map(PerfMap.from_entries([(0x1000, 0x10, "f"), (0x2000, 0x10, "g")]))
    lines = [b"a 1004 [unknown] (x)\n", b"\t2000 [unknown] (y)\n", b"\t3000 [unknown] (z)\n"] * 5
    whole = b"".join(symbolize_stream(lines, sym, SymbolizeStats()))
    stats = SymbolizeStats()
    small = b"".join(symbolize_stream(lines, sym, stats, block_lines=2))
    assert whole == small
    assert (stats.unknown, stats.resolved) == (15, 10)
    assert small.splitlines()[:3] == [
        b"a 1004 f+0x4 (x)",
        b"\t2000 g+0x0 (y)",
        b"\t3000 [unknown] (z)",
    ]
    bare = b"".join(symbolize_stream(lines[:1], sym, SymbolizeStats(), offsets=False))
    assert bare == b"a 1004 f (x)\n"


def test_only_frames_after_an_ip_are_touched() -> None:
    sym = Symbolizer()
    sym.add_perf_map(PerfMap.from_entries([(0x10, 0x10, "f")]))
    text = b"x10 [unknown]\n10[unknown]\n 10 [unknown]x\n 10 [unknown]\n10 [unknown] (d)"
    out = b"".join(symbolize_stream([text], sym, SymbolizeStats()))
    assert out == b"x10 [unknown]\n10[unknown]\n 10 [unknown]x\n 10 f+0x0\n10 f+0x0 (d)"


def test_symbolize_does_not_build_the_per_address_lists() -> None:
    """symbolize asked for a whole Symbol per named entry, which converts every column
    of the compiled table to Python lists: pure waste for a batch path."""
    sym = Symbolizer()
    sym.add_perf_map(PerfMap.from_entries([(0x1000, 0x10, "f")]))
    out = b"".join(symbolize_stream([b"\t1004 [unknown] (x)\n"], sym, SymbolizeStats()))
    assert out == b"\t1004 f+0x4 (x)\n"
    assert sym._table()._lists is None
