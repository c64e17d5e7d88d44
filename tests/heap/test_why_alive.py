"""heap.why_alive: top types by bytes and the shortest chain from a root, on a handmade graph
and on this process's heap (a leak held by a module global)."""

from __future__ import annotations

import sys

from profkit.heap.walk import LOCAL, MODULE, UNREFERENCED
from profkit.heap.why_alive import (
    HeapSnapshot,
    chains_to,
    format_report,
    take_snapshot,
    top_types,
    why_alive,
)


class Payload(bytearray):
    """A type of this test's own: no earlier test in the worker holds one."""

    __slots__ = ()


class Leak:
    """Held by the module global below."""

    def __init__(self, n: int) -> None:
        self.payload = Payload(n)


LEAKS: list[Leak] = []


def handmade() -> HeapSnapshot:
    """module 1 -> dict 2 -> list 3 -> Big 4 and Big 5; an unreferenced root 6 -> Big 5."""
    snap = HeapSnapshot()
    snap.objects = {
        1: ("module", 72, (2,)),
        2: ("dict", 1000, (3,)),
        3: ("list", 72, (4, 5)),
        4: ("Big", 5000, ()),
        5: ("Big", 7000, ()),
        6: ("tuple", 48, (5,)),
        8: ("Orphan", 10, ()),  # reached by nothing (not a root either)
    }
    snap.roots = {6: UNREFERENCED, 1: MODULE}
    snap.labels = {1: "app"}
    return snap


def test_top_types_rank_by_bytes_with_the_largest_example() -> None:
    totals = top_types(handmade(), 2)
    assert [(t.type_name, t.count, t.bytes, t.example) for t in totals] == [
        ("Big", 2, 12000, 5),
        ("dict", 1, 1000, 2),
    ]


def test_shortest_chain_from_the_first_kind_of_root() -> None:
    snap = handmade()
    chains = chains_to(snap, [4, 5, 8, 99])
    assert str(chains[4]) == "[module] module app -> dict -> list -> Big"
    assert str(chains[5]) == "[unreferenced] tuple -> Big"  # shorter wins over precedence
    assert 8 not in chains and 99 not in chains
    snap.roots[3] = LOCAL
    assert str(chains_to(snap, [4])[4]) == "[local] list -> Big"


def test_the_search_is_bounded() -> None:
    snap = handmade()
    assert chains_to(snap, [4], max_nodes=2) == {}
    assert 4 in chains_to(snap, [4], max_nodes=10)


def test_a_module_global_leak_is_explained() -> None:
    LEAKS[:] = [Leak(200_000) for _ in range(30)]
    try:
        snap = take_snapshot()
        reports = why_alive(snap, 1000)
        chain = chains_to(snap, [id(LEAKS[7])])[id(LEAKS[7])]
        assert str(chain) == f"[module] module {__name__} -> dict -> list -> {__name__}.Leak"
        assert chain.links[-1].object_id == id(LEAKS[7])
        # the payloads are held through a Leak (a type of this test's own: a test worker may
        # hold more bytearray bytes from earlier tests, in objects kept alive by other paths)
        top = next(r for r in reports if r.total.type_name == f"{__name__}.Payload")
        assert top.total.bytes >= 30 * 200_000
        assert top.chain is not None
        assert [link.type_name for link in top.chain.links][-2:] == [
            f"{__name__}.Leak",
            f"{__name__}.Payload",
        ]
        text = format_report(reports)
        assert f"module {__name__} -> dict -> list" in text
        assert snap.labels[id(sys.modules[__name__])] == __name__
    finally:
        LEAKS.clear()


def test_the_snapshot_does_not_describe_itself() -> None:
    snap = take_snapshot()
    assert id(snap.objects) not in snap.objects
    assert snap.stats.objects == len(snap.objects)
