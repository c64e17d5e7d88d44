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
        # the links named (issue 24, item 3): the global, the index, the attribute
        assert f"[module] {__name__}.LEAKS -> list[" in text
        assert f"{__name__}.Leak.payload -> {__name__}.Payload" in text
        assert str(chains_to(snap, [id(LEAKS[7])])[id(LEAKS[7])]).endswith(
            f"{__name__}.Leak"
        )  # chains_to alone keeps ids only
        assert snap.labels[id(sys.modules[__name__])] == __name__
    finally:
        LEAKS.clear()


def test_the_snapshot_does_not_describe_itself() -> None:
    snap = take_snapshot()
    assert id(snap.objects) not in snap.objects
    assert snap.stats.objects == len(snap.objects)


class Chunk(bytearray):
    """Another type of this test's own, held in a module-level dict."""

    __slots__ = ()


CACHE: dict[str, Chunk] = {}


def test_the_chain_names_the_module_variable_and_the_key() -> None:
    """Issue 24, item 3: 48 buffers held by a module-level dict read as the variable's
    name and a key, not ``module -> dict -> dict``."""
    CACHE.update({f"key{i}": Chunk(50_000) for i in range(48)})
    try:
        reports = why_alive(take_snapshot(), 1000)
        top = next(r for r in reports if r.total.type_name == f"{__name__}.Chunk")
        assert top.total.count == 48
        text = str(top.chain)
        assert text.startswith(f"[module] {__name__}.CACHE -> dict['key")
        assert text.endswith(f"'] -> {__name__}.Chunk")
    finally:
        CACHE.clear()


def test_long_keys_and_other_objects_are_not_shown() -> None:
    from profkit.heap.links import accessors

    key = "k" * 100
    holder = {key: Chunk(1), ("tuple", "key"): Chunk(1)}
    via, folded = accessors([holder, holder[key]])
    assert via == ["[...]", ""] and folded == [False, False]
    via, _ = accessors([holder, holder["tuple", "key"]])
    assert via == ["", ""]  # a key whose repr could run a user's code is not shown
    items = [1, Chunk(1)]
    assert accessors([items, items[1]])[0] == ["[1]", ""]


def test_a_proxy_posing_as_a_module_is_not_read_as_one() -> None:
    """lazy_importer puts objects in sys.modules whose ``__class__`` says ``module``:
    ``isinstance`` believed it, and the module-dict descriptor raised TypeError in the
    middle of a clean clone's run (the proxy was installed by a test dependency)."""
    from types import ModuleType

    from profkit.heap import links

    class Proxy:
        @property  # type: ignore[misc]
        def __class__(self) -> type:
            return ModuleType

    proxy = Proxy()
    assert isinstance(proxy, ModuleType)
    assert links.module_name(proxy) is None
    assert links.module_name(sys) == "sys"


def test_profkit_s_modules_and_what_only_they_hold_are_left_out() -> None:
    import profkit.runner.session as ours

    shared = "a string held by the program and by profkit " + "x" * 100
    ours.__dict__["_test_shared"] = shared
    globals()["_test_shared"] = shared
    try:
        snap = take_snapshot()
        assert id(ours) not in snap.objects and id(ours.__doc__) not in snap.objects
        assert id(shared) in snap.objects  # the program holds it too
        assert snap.own.objects > 0 and snap.own.bytes > 0
        full = take_snapshot(own=True)
        assert id(ours) in full.objects and id(ours.__doc__) in full.objects
    finally:
        del ours.__dict__["_test_shared"], globals()["_test_shared"]
