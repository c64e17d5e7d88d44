"""Format sniffing and map concatenation, now library functions (issue #21 item 5):
what ``perfmap show``/``lookup`` and ``perfmap convert`` decided in the command."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from profkit.errors import UsageError
from profkit.formats.perfmap import (
    PerfMap,
    R2RPerfMap,
    concat_maps,
    place_r2rmap,
    read_any_map,
    read_perf_map,
    read_r2rmap,
    sniff,
)
from profkit.formats.perfmap.concat import short_names

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "perfmap"
R2R = FIX / "MinimalR2R.ni.r2rmap"


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("MinimalR2R.dll", "image"),
        ("MinimalR2R.ni.r2rmap", "r2rmap"),
        ("System.ComponentModel.EventBasedAsync.ni.r2rmap", "r2rmap"),
        ("dotnet-info.map", "perf_map"),
    ],
)
def test_sniff_the_fixtures(name: str, kind: str) -> None:
    assert sniff((FIX / name).read_bytes(), str(FIX / name)) == kind


def test_sniff_by_content_and_by_name() -> None:
    assert sniff(b"ImageLoad;/x.dll;{0};0x1000;\n", "any.txt") == "perfinfo"
    assert sniff(b"", "/tmp/perfinfo-12.map") == "perfinfo"
    assert sniff(b"FFFFFFFF 00000000 x\n", "renamed.txt") == "r2rmap"
    assert sniff(b"1000 10 f\n", "perf-12.map") == "perf_map"


def test_read_any_map() -> None:
    assert isinstance(read_any_map(R2R.read_bytes(), str(R2R)), R2RPerfMap)
    assert isinstance(read_any_map(b"1000 10 func\n", "perf-1.map"), PerfMap)


def test_placed_and_concatenated_after_an_existing_map_in_its_style() -> None:
    m = read_r2rmap(R2R.read_bytes(), path=str(R2R))
    placed = place_r2rmap(m, 0x10000, str(R2R), "[MinimalR2R] ")
    assert placed.starts.tolist() == (m.rvas + np.uint64(0x10000)).tolist()
    assert all(n.startswith("[MinimalR2R] ") for n in placed.names)
    existing = b"0x0000000000001000 0x10 [JIT] f"  # dotnet 8 style, no final newline
    data = concat_maps([placed, placed], existing, "perf-1.map")
    assert data.startswith(existing + b"\n")
    back = read_perf_map(data)
    assert len(back) == 1 + 2 * len(m)
    assert back.style.prefix == "0x" and data.endswith(b"\n")
    plain = concat_maps([place_r2rmap(m, 0x10000, str(R2R))])
    assert plain.splitlines()[0].split()[0] == f"{0x10000 + int(m.rvas[0]):x}".encode()


def test_a_base_past_the_address_space_and_short_names() -> None:
    m = read_r2rmap(R2R.read_bytes(), path=str(R2R))
    with pytest.raises(UsageError, match="past the 64-bit space"):
        place_r2rmap(m, (1 << 64) - 1, str(R2R))
    tiny = R2RPerfMap.from_entries(m.header, [(0x10, 4, "ab"), (0x20, 4, "abc")])
    assert short_names([place_r2rmap(tiny, 0, "t.r2rmap")]) == 1
