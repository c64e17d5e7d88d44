"""The heap census file's reader: a written census read back, and bad files (one error
naming the file and line, or the graph file and byte offset; never a traceback)."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from profkit.clr.censusfile import read_census
from profkit.clr.censusgraph import NO_OFFSET, Graph, shortest_paths
from profkit.errors import FormatError

GOOD = (
    "profkit-clr-heap\t2\n"
    "r\t10\t3\t1\t99\n"
    "r\t20\t1\t0\tabc\n"
    "graph\t2\t3\n"
    "gc\t0\t1500\n"
    "cut\t0\t4000000\n"
    "t\t1\t1\t32\t10\tApp.Holder\n"
    "t\t3\t1\t1000\t30\tSystem.Byte[]\n"
    "f\t1\t8\tnext\n"
    "s\t20\tApp.Holder.Kept\n"
    "m\tabc\tApp.Program.Main\n"
    "end\n"
)


#: the graph of GOOD: 0x10 (class 1) holds 0x20 at 8 and 0x30 at 0x10; 0x20 holds 0x30
OBJECTS = [(0x10, 1, 32, 2), (0x20, 2, 40, 1)]
REFS = [(0x20, 8), (0x30, 0x10), (0x30, 0x10)]


def write_census(
    path: Path,
    text: str = GOOD,
    objects: list[tuple[int, int, int, int]] = OBJECTS,
    refs: list[tuple[int, int]] = REFS,
) -> None:
    path.write_text(text)
    np.array(objects, np.uint64).reshape(-1, 4).tofile(f"{path}.objects")
    np.array(refs, np.uint64).reshape(-1, 2).tofile(f"{path}.refs")


def test_a_census_reads_back(tmp_path: Path) -> None:
    path = tmp_path / "census.txt"
    write_census(path)
    census = read_census(str(path))
    graph = census.graph
    assert graph.ids.tolist() == [0x10, 0x20] and graph.classes.tolist() == [1, 2]
    assert graph.refs[graph.starts[0] : graph.starts[0] + graph.counts[0]].tolist() == [0x20, 0x30]
    assert [(r.object_id, r.kind, r.label) for r in census.roots] == [
        (0x20, "static", "App.Holder.Kept"),
        (0x10, "handle", "pinned"),
        (0x20, "stack", "App.Program.Main"),
    ]
    assert census.fields == {1: {8: "next"}}
    assert census.gc_ns == 1500 and census.gc_status == 0
    assert [t.name for t in census.totals] == ["App.Holder", "System.Byte[]"]
    assert (graph.offset(0, 0x30), graph.offset(1, 0x30), graph.offset(1, 0x10)) == (
        0x10,
        0x10,
        None,
    )


def test_an_at_census_says_when(tmp_path: Path) -> None:
    path = tmp_path / "census.txt"
    write_census(path, GOOD.replace("end\n", "at\t5000000000\t5002000000\t1\nend\n"))
    census = read_census(str(path))
    assert (census.at_ns, census.taken_ns, census.timed) == (5_000_000_000, 5_002_000_000, True)
    path.write_text(GOOD)
    assert read_census(str(path)).at_ns == 0


def test_the_graph_is_capped(tmp_path: Path) -> None:
    path = tmp_path / "census.txt"
    write_census(path)
    census = read_census(str(path), max_objects=1)
    assert census.graph.ids.tolist() == [0x10] and census.cut == 1
    assert census.graph.refs.tolist() == [0x20, 0x30]


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
    write_census(path)
    path.write_bytes(bytes(data))
    try:
        read_census(str(path))
    except FormatError as exc:
        assert str(path) in str(exc)
        assert "\n" not in str(exc)


@pytest.mark.parametrize("seed", range(40))
def test_a_cut_or_mutated_graph_is_one_format_error(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    path = tmp_path / "census.txt"
    write_census(path)
    victim = Path(f"{path}.objects" if seed % 4 < 2 else f"{path}.refs")
    data = bytearray(victim.read_bytes())
    if seed % 2:
        data = data[: rng.randrange(len(data))]
    else:
        for _ in range(3):
            data[rng.randrange(len(data))] = rng.randrange(256)
    victim.write_bytes(bytes(data))
    try:
        read_census(str(path))
    except FormatError as exc:
        assert str(victim) in str(exc) and "offset" in str(exc)
        assert "\n" not in str(exc)


def test_a_missing_graph_is_one_format_error(tmp_path: Path) -> None:
    path = tmp_path / "census.txt"
    path.write_text(GOOD)
    with pytest.raises(FormatError, match=r"census\.txt\.objects"):
        read_census(str(path))


def _dict_search(
    objects: dict[int, tuple[int, ...]], roots: list[int], target: int
) -> list[int] | None:
    """The dict-based search of profkit.heap.why_alive.chains_to, the oracle."""
    from profkit.heap.why_alive import HeapSnapshot, chains_to

    snapshot = HeapSnapshot(objects={k: ("t", 0, refs) for k, refs in objects.items()})
    for root in roots:
        snapshot.objects.setdefault(root, ("t", 0, ()))
        snapshot.roots.setdefault(root, "static")
    snapshot.objects.setdefault(target, ("t", 0, ()))
    chain = chains_to(snapshot, [target]).get(target)
    return [link.object_id for link in chain.links] if chain else None


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(st.integers(1, 30), st.lists(st.integers(1, 40), max_size=6), max_size=25),
    st.lists(st.integers(1, 40), min_size=1, max_size=4),
    st.integers(1, 40),
)
def test_the_numpy_search_finds_the_dict_search_s_chains(
    objects: dict[int, list[int]], roots: list[int], target: int
) -> None:
    ids = list(objects)
    counts = [len(objects[k]) for k in ids]
    graph = Graph(
        np.array(ids, np.uint64), np.zeros(len(ids), np.uint64), np.zeros(len(ids), np.uint64),
        np.cumsum(counts, dtype=np.int64) - np.array(counts, np.int64),
        np.array(counts, np.int64),
        np.array([r for k in ids for r in objects[k]], np.uint64),
        np.full(sum(counts), NO_OFFSET, np.uint64),
    )  # fmt: skip
    found = shortest_paths(graph, [target, *roots], roots, [target]).get(target)
    assert found == _dict_search({k: tuple(v) for k, v in objects.items()}, roots, target)


@pytest.mark.parametrize(
    ("status", "said"),
    [("0", None), ("800705b4", "did not end within 600 s"), ("80004005", "HRESULT 0x80004005")],
)
def test_a_failed_forced_gc_is_one_line(tmp_path: Path, status: str, said: str | None) -> None:
    from profkit.clr.census import refused

    path = tmp_path / "census.txt"
    write_census(path, GOOD.replace("gc\t0\t", f"gc\t{status}\t"))
    why = refused(read_census(str(path)))
    assert (why is None) if said is None else (why is not None and said in why and "\n" not in why)
