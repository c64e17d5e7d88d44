"""The heap census's object graph (``FILE.objects``, ``FILE.refs``), read and searched with numpy.

``libprofkit_clr.so`` writes, beside the census file, one record of four little-endian
u64 per object holding references (object, class, size, number of references) and one of
two per reference (the object referred to, its offset in the holder or ``~0``), in the
order the GC reported them; the census file's ``graph`` record gives both counts. Why
binary and numpy: a million objects' text took seconds of Python to read (issue 24); the
arrays read in milliseconds, and the search from the roots runs a level at a time.

:func:`shortest_paths` is the same breadth-first search as
:func:`profkit.heap.why_alive.chains_to` (roots in their order, each object's references
in theirs, the first to reach an object is its parent), so the chains are the ones the
dict-based search found, link for link.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from profkit.errors import FormatError

U64 = npt.NDArray[np.uint64]
I64 = npt.NDArray[np.int64]
_OBJECT = np.dtype([("id", "<u8"), ("cls", "<u8"), ("size", "<u8"), ("n", "<u8")])
_REF = np.dtype([("id", "<u8"), ("offset", "<u8")])
NO_OFFSET = (1 << 64) - 1  #: the reference was not found in its holder's slots


@dataclass(slots=True)
class Graph:
    """Objects holding references, and their references in order (``starts[i]`` is where
    object ``i``'s begin in ``refs``)."""

    ids: U64
    classes: U64
    sizes: U64
    starts: I64
    counts: I64
    refs: U64
    offsets: U64

    @classmethod
    def empty(cls) -> Graph:
        z = np.zeros(0, np.uint64)
        return cls(z, z, z, np.zeros(0, np.int64), np.zeros(0, np.int64), z, z)

    def offset(self, holder_index: int, ref: int) -> int | None:
        """Where in object ``holder_index`` the reference to ``ref`` is stored, if found."""
        a = int(self.starts[holder_index])
        b = a + int(self.counts[holder_index])
        hits = np.flatnonzero((self.refs[a:b] == ref) & (self.offsets[a:b] != NO_OFFSET))
        return int(self.offsets[a + hits[0]]) if hits.size else None


def read_graph(path: str, objects: int, refs: int, max_objects: int) -> tuple[Graph, int]:
    """The graph beside census ``path`` (``graph`` record: ``objects``, ``refs``), at most
    ``max_objects`` objects kept; returns it and how many were left out. Each file's size
    is checked against its count before anything is read."""
    kept = min(objects, max_objects)
    raw_objects = _read_exact(path + ".objects", objects, _OBJECT)
    raw_objects = raw_objects[:kept]
    too_many = raw_objects["n"] > np.uint64(refs)  # checked as u64: before any cast or sum
    if too_many.any():
        bad = int(np.argmax(too_many))
        raise FormatError(
            "malformed", "an object's reference count exceeds the file's",
            path=path + ".objects", offset=bad * _OBJECT.itemsize + 24,
        )  # fmt: skip
    counts = raw_objects["n"].astype(np.int64)
    ends = np.cumsum(counts)
    total = int(ends[-1]) if ends.size else 0
    raw_refs = _read_exact(path + ".refs", refs, _REF)
    if kept == objects and total != refs:
        raise FormatError(
            "malformed", f"{total} references for {refs} in the file", path=path + ".refs",
            offset=min(total, refs) * _REF.itemsize,
        )  # fmt: skip
    if total > refs:
        raise FormatError("malformed", "more references than the file holds", path=path + ".refs")
    graph = Graph(
        raw_objects["id"].copy(),
        raw_objects["cls"].copy(),
        raw_objects["size"].copy(),
        ends - counts,
        counts,
        raw_refs["id"][:total].copy(),
        raw_refs["offset"][:total].copy(),
    )
    return graph, objects - kept


def _read_exact(path: str, count: int, dtype: np.dtype) -> npt.NDArray[np.void]:
    try:
        size = os.path.getsize(path)
        if size != count * dtype.itemsize:
            raise FormatError(
                "truncated" if size < count * dtype.itemsize else "malformed",
                f"{size} bytes, not {count} records of {dtype.itemsize}",
                path=path, offset=min(size, count * dtype.itemsize),
            )  # fmt: skip
        return np.fromfile(path, dtype=dtype, count=count)
    except OSError as exc:
        raise FormatError("unreadable", exc.strerror or str(exc), path=path) from None


def shortest_paths(
    graph: Graph, extra: Sequence[int], roots: Sequence[int], targets: Sequence[int]
) -> dict[int, list[int]]:
    """The shortest path (object ids, root first) from ``roots`` (in order of precedence)
    to each of ``targets`` reached, through the graph's objects and ``extra`` ones (objects
    without references, such as the targets and roots themselves)."""
    nodes = np.sort(np.concatenate([graph.ids, np.asarray(extra, np.uint64)]))
    if nodes.size:  # sorted, then each id once (np.unique's hashing is slower on a million)
        nodes = nodes[np.concatenate([[True], nodes[1:] != nodes[:-1]])]
    n = nodes.size
    starts = np.zeros(n, np.int64)
    counts = np.zeros(n, np.int64)
    where = np.searchsorted(nodes, graph.ids)
    starts[where], counts[where] = graph.starts, graph.counts  # the last record of an id wins
    ref_node = _index(nodes, graph.refs)
    parent = np.full(n, -1, np.int64)
    frontier = _index(nodes, np.asarray(roots, np.uint64))
    _, first = np.unique(frontier, return_index=True)
    frontier = frontier[np.sort(first)]
    parent[frontier] = frontier
    wanted = _index(nodes, np.asarray(targets, np.uint64))
    while frontier.size and (parent[wanted] < 0).any():
        frontier = _next_level(frontier, starts, counts, ref_node, parent)
    found: dict[int, list[int]] = {}
    for target, node in zip(targets, wanted.tolist(), strict=True):
        if node < 0 or parent[node] < 0:
            continue
        path = [node]
        while parent[path[-1]] != path[-1]:
            path.append(int(parent[path[-1]]))
        found[target] = [int(nodes[i]) for i in reversed(path)]
    return found


def _index(nodes: U64, ids: U64) -> I64:
    """Each id's index in the sorted ``nodes``, or -1."""
    at = np.searchsorted(nodes, ids).astype(np.int64)
    inside = at < nodes.size
    hit = np.zeros(ids.size, bool)
    hit[inside] = nodes[at[inside]] == ids[inside]
    return np.where(hit, at, -1)


def _next_level(frontier: I64, starts: I64, counts: I64, ref_node: I64, parent: I64) -> I64:
    """One level of the search: the objects the frontier reaches first, in the order a
    first-in-first-out queue would reach them, their parents set."""
    c = counts[frontier]
    total = int(c.sum())
    if not total:
        return np.zeros(0, np.int64)
    sources = np.repeat(frontier, c)
    begin = np.repeat(starts[frontier] - (np.cumsum(c) - c), c)
    edges = ref_node[begin + np.arange(total)]
    keep = edges >= 0
    keep[keep] = parent[edges[keep]] < 0
    edges, sources = edges[keep], sources[keep]
    _, first = np.unique(edges, return_index=True)
    first.sort()
    reached = edges[first]
    parent[reached] = sources[first]
    return reached
