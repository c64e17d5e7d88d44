"""Symbolizer: edges of every real entry, overlap rule against a brute-force oracle."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from profkit.formats.perfmap.perfpid import PerfMap, read_perf_map
from profkit.formats.perfmap.r2rmap import read_r2rmap
from profkit.formats.perfmap.symbolizer import Symbolizer


def _edges(starts: list[int], sizes: list[int]) -> list[int]:
    out = []
    for a, n in zip(starts, sizes, strict=True):
        out += [a, a + max(n, 1) - 1, a + max(n, 1)]
    return out


def _check_edges(sym: Symbolizer, starts: list[int], sizes: list[int], names: list[str]) -> None:
    addrs = _edges(starts, sizes)
    batch = sym.symbols(sym.lookup_many(addrs))
    one = [sym.lookup(a) for a in addrs]
    assert batch == one
    all_ranges = sorted(zip(starts, sizes, strict=True))
    for i, (a, n, name) in enumerate(zip(starts, sizes, names, strict=True)):
        first, last, past = one[3 * i : 3 * i + 3]
        assert first is not None and (first.name, first.offset) == (name, 0)
        assert last is not None and (last.name, last.offset) == (name, n - 1)
        nxt = [r for r in all_ranges if r[0] == a + n]
        if nxt:
            assert past is not None and past.start == a + n
        else:
            assert past is None, hex(a + n)


def test_r2rmap_sample_edges_with_base(r2rmap_bytes: bytes) -> None:
    m = read_r2rmap(r2rmap_bytes)
    base = 0x7F0012340000
    sym = Symbolizer()
    sym.add_r2rmap(m, base, "EventBasedAsync")
    starts = [base + r for r in m.rvas.tolist()]
    _check_edges(sym, starts, m.lengths.tolist(), m.names)
    hit = sym.lookup(base + 0x122F0 + 0x11A - 1)
    assert hit is not None
    assert (
        hit.label() == "System.ComponentModel.BackgroundWorker::RunWorkerAsync(System.Object)+0x119"
    )
    assert hit.source == "EventBasedAsync"
    assert sym.lookup(base + 0x115D0 - 1) is None  # before the first entry
    assert sym.lookup(0) is None
    assert sym.lookup(base - 1) is None


def test_r2rmap_without_base_resolves_rvas(r2rmap_bytes: bytes) -> None:
    sym = Symbolizer()
    sym.add_r2rmap(read_r2rmap(r2rmap_bytes), 0)
    hit = sym.lookup(0x115D5)
    assert hit is not None and hit.offset == 5


def test_dotnet_sample_edges(dotnet_map_bytes: bytes) -> None:
    m = read_perf_map(dotnet_map_bytes)
    sym = Symbolizer()
    sym.add_perf_map(m, "dotnet-info.map")
    _check_edges(sym, m.starts.tolist(), m.sizes.tolist(), m.names)


def test_several_maps_and_sources(r2rmap_bytes: bytes, dotnet_map_bytes: bytes) -> None:
    sym = Symbolizer()
    sym.add_perf_map(read_perf_map(dotnet_map_bytes), "jit")
    sym.add_r2rmap(read_r2rmap(r2rmap_bytes), 0x7F0000000000, "r2r")
    a = sym.lookup(0x7F1484580018)
    b = sym.lookup(0x7F00000115D0)
    assert a is not None and a.source == "jit"
    assert b is not None and b.source == "r2r"
    assert sym.sources == ["jit", "r2r"]


def test_documented_overlap_rule() -> None:
    m = PerfMap.from_entries(
        [
            (0x400, 0x100, "outer"),
            (0x420, 0x20, "inner"),  # smallest containing range wins
            (0x480, 0x10, "dup-old"),
            (0x480, 0x10, "dup-new"),  # identical range: the later line wins
            (0x600, 0, "zero"),  # zero size covers only its start
        ]
    )
    sym = Symbolizer()
    sym.add_perf_map(m)
    got = {
        a: (s.name if (s := sym.lookup(a)) else None)
        for a in (0x400, 0x420, 0x43F, 0x440, 0x485, 0x4FF, 0x500, 0x600, 0x601)
    }
    assert got == {
        0x400: "outer", 0x420: "inner", 0x43F: "inner", 0x440: "outer", 0x485: "dup-new",
        0x4FF: "outer", 0x500: None, 0x600: "zero", 0x601: None,
    }  # fmt: skip
    # order of maps matters only for ties: a later map's identical range wins
    other = PerfMap.from_entries([(0x420, 0x20, "inner-later")])
    sym.add_perf_map(other, "second")
    s = sym.lookup(0x430)
    assert s is not None and (s.name, s.source) == ("inner-later", "second")


def test_top_of_address_space() -> None:
    sym = Symbolizer()
    sym.add_perf_map(PerfMap.from_entries([(2**64 - 0x10, 0x100, "top")]))
    s = sym.lookup(2**64 - 2)
    assert s is not None and s.offset == 0xE
    assert sym.lookup_many([2**64 - 2]).entries.tolist() == [0]


def test_empty_symbolizer() -> None:
    sym = Symbolizer()
    assert sym.lookup(5) is None
    assert sym.lookup_many([1, 2]).entries.tolist() == [-1, -1]


def _oracle(entries: list[tuple[int, int, str]], addr: int) -> tuple[str, int] | None:
    best = None
    for i, (a, n, name) in enumerate(entries):
        if a <= addr < a + max(n, 1):
            key = (max(n, 1), -i)
            if best is None or key < best[0]:
                best = (key, name, addr - a)
    return None if best is None else (best[1], best[2])


@settings(max_examples=200, deadline=None)
@given(
    entries=st.lists(
        st.tuples(st.integers(0, 200), st.integers(0, 60), st.text("abc", min_size=1, max_size=3)),
        max_size=25,
    ),
    split=st.integers(0, 25),
)
def test_matches_brute_force_oracle(entries: list, split: int) -> None:
    sym = Symbolizer()
    sym.add_perf_map(PerfMap.from_entries(entries[:split]), "one")
    sym.add_perf_map(PerfMap.from_entries(entries[split:]), "two")
    addrs = list(range(0, 270))
    batch = sym.lookup_many(np.array(addrs, dtype=np.uint64))
    singles = [sym.lookup(a) for a in addrs]
    assert sym.symbols(batch) == singles
    for a, got in zip(addrs, singles, strict=True):
        want = _oracle(entries, a)
        assert (None if got is None else (got.name, got.offset)) == want
