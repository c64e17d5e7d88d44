"""The heap census file's reader: a written census read back, and bad files (one error
naming the file and line, never a traceback)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from profkit.clr.censusfile import read_census, ref_offsets
from profkit.errors import FormatError

GOOD = (
    "profkit-clr-heap\t1\n"
    "r\t10\t3\t1\t99\n"
    "r\t20\t1\t0\tabc\n"
    "o\t10\t1\t32\t20@8,30@10\n"
    "o\t20\t2\t40\t30@10\n"
    "gc\t0\t1500\n"
    "cut\t0\t4000000\n"
    "t\t1\t1\t32\t10\tApp.Holder\n"
    "t\t3\t1\t1000\t30\tSystem.Byte[]\n"
    "f\t1\t8\tnext\n"
    "s\t20\tApp.Holder.Kept\n"
    "m\tabc\tApp.Program.Main\n"
    "end\n"
)


def test_a_census_reads_back(tmp_path: Path) -> None:
    path = tmp_path / "census.txt"
    path.write_text(GOOD)
    census = read_census(str(path))
    assert census.objects[0x10] == (1, 32, (0x20, 0x30))
    assert [(r.object_id, r.kind, r.label) for r in census.roots] == [
        (0x20, "static", "App.Holder.Kept"),
        (0x10, "handle", "pinned"),
        (0x20, "stack", "App.Program.Main"),
    ]
    assert census.fields == {1: {8: "next"}}
    assert census.gc_ns == 1500 and census.gc_status == 0
    assert [t.name for t in census.totals] == ["App.Holder", "System.Byte[]"]
    assert ref_offsets(str(path), {(0x10, 0x30), (0x20, 0x30)}) == {
        (0x10, 0x30): 0x10,
        (0x20, 0x30): 0x10,
    }


def test_an_at_census_says_when(tmp_path: Path) -> None:
    path = tmp_path / "census.txt"
    path.write_text(GOOD.replace("end\n", "at\t5000000000\t5002000000\t1\nend\n"))
    census = read_census(str(path))
    assert (census.at_ns, census.taken_ns, census.timed) == (5_000_000_000, 5_002_000_000, True)
    assert read_census(str(tmp_path / "census.txt")).objects[0x10][1] == 32
    path.write_text(GOOD)
    assert read_census(str(path)).at_ns == 0


def test_the_graph_is_capped(tmp_path: Path) -> None:
    path = tmp_path / "census.txt"
    path.write_text(GOOD)
    census = read_census(str(path), max_objects=1)
    assert len(census.objects) == 1 and census.cut == 1


@pytest.mark.parametrize("seed", range(40))
def test_a_cut_or_mutated_file_is_one_format_error(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    data = bytearray(GOOD.encode())
    if seed % 2:
        data = data[: rng.randrange(len(data) - 4)]
    else:
        for _ in range(3):
            data[rng.randrange(len(data))] = rng.choice(b"\tx-@,\n9g")
    path = tmp_path / "census.txt"
    path.write_bytes(bytes(data))
    try:
        read_census(str(path))
    except FormatError as exc:
        assert str(path) in str(exc)
        assert "\n" not in str(exc)


@pytest.mark.parametrize(
    ("status", "said"),
    [("0", None), ("800705b4", "did not end within 600 s"), ("80004005", "HRESULT 0x80004005")],
)
def test_a_failed_forced_gc_is_one_line(tmp_path: Path, status: str, said: str | None) -> None:
    from profkit.clr.census import refused

    path = tmp_path / "census.txt"
    path.write_text(GOOD.replace("gc\t0\t", f"gc\t{status}\t"))
    why = refused(read_census(str(path)))
    assert (why is None) if said is None else (why is not None and said in why and "\n" not in why)
