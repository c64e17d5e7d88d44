"""heap.walk: a known object graph comes out as built (references, roots), the walk keeps
nothing alive and runs none of the program's code."""

from __future__ import annotations

import gc
import sys
import weakref
from pathlib import Path

import pytest

from profkit.heap.walk import FRAME, LOCAL, MODULE, UNREFERENCED, WalkStats, walk_heap


class Thing:
    """A plain user object."""

    def __init__(self, payload: object = None) -> None:
        self.payload = payload


class Hostile:
    """Every hook the walk must not call raises."""

    def __eq__(self, other: object) -> bool:
        raise AssertionError("__eq__ ran")

    def __hash__(self) -> int:
        raise AssertionError("__hash__ ran")

    def __sizeof__(self) -> int:
        raise AssertionError("__sizeof__ ran")

    def __repr__(self) -> str:
        raise AssertionError("__repr__ ran")


#: calls of Meta.__module__ (it must not raise: other code in the session names types too)
META_CALLS: list[int] = []


class Meta(type):
    @property  # type: ignore[misc]
    def __module__(cls) -> str:  # type: ignore[override]
        META_CALLS.append(1)
        return "not-the-walk"


class WithMeta(metaclass=Meta):
    pass


HELD: list[Thing] = []
#: whether a function's locals are roots of their own kind (3.13+: PEP 667)
LOCALS_READ = sys.version_info >= (3, 13)


class Graph:
    """What one walk delivered."""

    def __init__(self) -> None:
        self.objects: dict[int, tuple[str, int, tuple[int, ...]]] = {}
        self.roots: dict[int, str] = {}
        self.root_calls = 0

    def on_object(self, object_id: int, type_name: str, size: int, refs: tuple[int, ...]) -> None:
        assert object_id not in self.objects, "an object delivered twice"
        self.objects[object_id] = (type_name, size, refs)

    def on_roots(self, ids: tuple[int, ...], kinds: tuple[str, ...]) -> None:
        self.root_calls += 1
        assert len(ids) == len(kinds)
        self.roots.update(zip(ids, kinds, strict=True))

    def reaches(self, source: int, target: int, steps: int = 2) -> bool:
        """``target`` within ``steps`` references of ``source`` (an instance's attributes
        may be its own references or its ``__dict__``'s, by version)."""
        frontier = {source}
        for _ in range(steps):
            frontier = {r for s in frontier for r in self.objects.get(s, ("", 0, ()))[2]}
            if target in frontier:
                return True
        return False


def walk() -> tuple[Graph, WalkStats]:
    graph = Graph()
    stats = walk_heap(graph.on_object, graph.on_roots)
    return graph, stats


def test_known_graph_references_and_roots() -> None:
    a, b = Thing(), Thing()
    a.payload, b.payload = b, a  # a cycle
    HELD[:] = [Thing("leaf-string"), Thing(12345678901234)]
    local_only = Thing()
    try:
        graph, stats = walk()
        assert graph.root_calls == 1
        assert stats.objects == len(graph.objects) and stats.roots == len(graph.roots)
        assert graph.objects[id(a)][0] == f"{__name__}.Thing"
        assert graph.reaches(id(a), id(b)) and graph.reaches(id(b), id(a))
        # the module-global list holds exactly its items (in the order of tp_traverse)
        type_name, size, refs = graph.objects[id(HELD)]
        assert type_name == "list" and sorted(refs) == sorted(id(t) for t in HELD)
        assert size == sys.getsizeof(HELD)
        # untracked leaves are objects too, with their sizes
        leaf = HELD[0].payload
        assert graph.objects[id(leaf)][:2] == ("str", sys.getsizeof(leaf))
        assert graph.reaches(id(HELD[0]), id(leaf))
        # roots: the module, this frame, its locals
        assert graph.roots[id(sys.modules[__name__])] == MODULE
        if LOCALS_READ:
            assert graph.roots[id(local_only)] == LOCAL
            assert graph.roots[id(a)] == LOCAL
        else:  # reading a function's locals would keep them alive (see _locals_readable)
            assert graph.roots[id(local_only)] == UNREFERENCED
        assert FRAME in graph.roots.values() and UNREFERENCED in graph.roots.values()
        # every root is an object of the walk
        assert set(graph.roots) <= set(graph.objects)
    finally:
        HELD.clear()


def test_the_walks_own_frames_are_left_out() -> None:
    graph, _ = walk()
    frames = [k for k, kind in graph.roots.items() if kind == FRAME]
    here = sys._getframe()
    assert id(here) in frames
    names = {graph.objects[f][0] for f in frames}
    assert names == {"frame"}


def test_skip_code_leaves_out_a_frame_and_its_locals() -> None:
    secret = Thing()
    graph = Graph()

    def skip(code: object) -> bool:
        return code is test_skip_code_leaves_out_a_frame_and_its_locals.__code__

    walk_heap(graph.on_object, graph.on_roots, skip_code=skip)
    assert id(sys._getframe()) not in graph.roots
    assert graph.roots.get(id(secret)) != LOCAL


def test_nothing_is_kept_alive() -> None:
    a, b = Thing(), Thing()
    a.payload, b.payload = b, a
    plain = Thing([1, 2, 3])
    refs = [weakref.ref(x) for x in (a, b, plain)]
    graph, _ = walk()
    assert id(plain) in graph.objects
    del a, b, plain, graph
    assert refs[2]() is None  # freed by its reference count alone
    gc.collect()
    assert [r() for r in refs] == [None, None, None]


def test_no_program_code_runs() -> None:
    hostile = [Hostile() for _ in range(3)]
    meta = WithMeta()
    META_CALLS.clear()
    graph, stats = walk()
    assert META_CALLS == []
    for h in hostile:
        type_name, size, _ = graph.objects[id(h)]
        assert type_name == f"{__name__}.Hostile"
        assert size == object.__sizeof__(h) + (sys.getsizeof([]) - [].__sizeof__())
    assert graph.objects[id(meta)][0] == f"{__name__}.WithMeta"
    assert stats.size_failures == 0


def test_a_raising_callback_stops_the_walk_and_propagates() -> None:
    def boom(*args: object) -> None:
        raise ValueError("profiler bug")

    with pytest.raises(ValueError, match="profiler bug"):
        walk_heap(boom, boom)


_ASYNCIO_THEN_WALK = """
import asyncio, gc
from profkit.heap.walk import walk_heap

async def child(i):
    await asyncio.sleep(0)
    return i

async def parent():
    return sum(await asyncio.gather(child(1), child(2)))

asyncio.run(parent())  # leaves dead future iterators on _asyncio's free list
walk_heap(lambda *a: None, lambda *a: None)
gc.collect()  # hung forever on 3.12.0-3.12.5 when the walk traversed _asyncio (gh-122695)
print("ok")
"""


def test_a_walk_after_asyncio_leaves_the_collector_working(tmp_path: Path) -> None:
    import subprocess

    prog = tmp_path / "p.py"
    prog.write_text(_ASYNCIO_THEN_WALK)
    proc = subprocess.run([sys.executable, str(prog)], capture_output=True, text=True, timeout=60)
    assert (proc.returncode, proc.stdout) == (0, "ok\n"), proc.stderr[-2000:]
