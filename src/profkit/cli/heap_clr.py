"""`profkit heap run app.dll ARGS`: the .NET half of `heap run`.

The census comes from :mod:`profkit.clr.census`; the chains are found by the same search
as a Python script's (:func:`profkit.heap.why_alive.chains_to`, done on the census's numpy
arrays by :func:`profkit.clr.censusgraph.shortest_paths`; roots in the order static,
stack, finalizer, handle, other) and printed by the same
:func:`~profkit.heap.why_alive.format_report`, each link named: a static root as
``Namespace.Type.Field``, a stack root by its method, a handle by its kind, a field by
its name and an array element by its index.
"""

from __future__ import annotations

import tempfile

import numpy as np

from profkit.clr.censusfile import Census, ClassTotal, Root
from profkit.clr.censusgraph import shortest_paths
from profkit.engine.contract import Outcome
from profkit.heap.why_alive import Chain, Link, TypeReport, TypeTotal, format_report

#: the order of root kinds a chain is searched from (earlier kinds win ties of length)
ROOT_ORDER = ("static", "stack", "finalizer", "handle", "other")


def run_report(
    assembly: str, args: list[str], dotnet: str | None, top: int, *, at_ns: int = 0
) -> tuple[str, Outcome]:
    """Run the assembly, and return the report text and how the program ended (``at_ns``:
    the census that long after the runtime's start, see :func:`~profkit.clr.census.run_census`)."""
    from profkit.clr.census import run_census

    with tempfile.TemporaryDirectory(prefix="profkit-heap-") as tmp:
        path = f"{tmp}/census.txt"
        outcome = run_census(assembly, args, path, dotnet=dotnet, at_ns=at_ns)
        if outcome.census is None:
            return f"profkit heap: {outcome.problem}\n", outcome.ended
        return census_report(outcome.census, top), outcome.ended


def census_report(census: Census, top: int) -> str:
    """The report of one census."""
    objects = sum(t.count for t in census.totals)
    size = sum(t.bytes for t in census.totals)
    text = (
        f"profkit heap: {objects:,} objects, {size:,} bytes (.NET, after a full GC{_when(census)}; "
        f"census took {census.gc_ns / 1e6:.1f} ms, naming {census.names_ns / 1e6:.1f} ms)\n"
    )
    if census.cut:
        text += f"profkit heap: {census.cut:,} objects left out of the reference graph (cap): chains may be missing\n"
    ranked = sorted(census.totals, key=lambda t: (-t.bytes, t.name))[:top]
    chains = _chains(census, ranked)
    reports = [
        TypeReport(TypeTotal(t.name, t.count, t.bytes, t.example), chains.get(t.example))
        for t in ranked
    ]
    return text + format_report(reports)


def _chains(census: Census, ranked: list[ClassTotal]) -> dict[int, Chain]:
    """One chain from a root to each ranked type's example, its links named: the shortest
    (:func:`~profkit.clr.censusgraph.shortest_paths`), roots in :data:`ROOT_ORDER`."""
    rank = {kind: i for i, kind in enumerate(ROOT_ORDER)}
    first: dict[int, Root] = {}  # object -> the root of highest precedence holding it
    for root in sorted(census.roots, key=lambda r: rank.get(r.kind, len(rank))):
        first.setdefault(root.object_id, root)
    examples = [t.example for t in ranked]
    paths = shortest_paths(census.graph, [*examples, *first], list(first), examples)
    classes = {t.example: t.class_id for t in ranked}
    holders = _holders(census, {key for path in paths.values() for key in path})
    out: dict[int, Chain] = {}
    for target, path in paths.items():
        root = first[path[0]]
        links: list[Link] = []
        for i, key in enumerate(path):
            at = holders.get(key)
            class_id = int(census.graph.classes[at]) if at is not None else classes.get(key, 0)
            name = census.class_name(class_id) if class_id else "(object)"
            label = root.label if i == 0 and root.kind == "static" else ""
            offset = None
            if at is not None and i + 1 < len(path):
                offset = census.graph.offset(at, path[i + 1])
            via = _via(census, class_id, name, offset) if offset is not None else ""
            if label and not via:  # a static field's object, the example itself
                links.append(Link(key, label))
            else:
                links.append(Link(key, name, label, via))
        out[target] = Chain(_root_title(root.kind, root.label), tuple(links))
    return out


def _when(census: Census) -> str:
    """When an ``--at`` census was taken ("" for the end's census without ``--at``)."""
    if not census.at_ns:
        return ""
    if census.timed:
        return f" forced at {census.taken_ns / 1e9:.1f} s"
    return f" at the program's end, {census.taken_ns / 1e9:.1f} s: it ended before {census.at_ns / 1e9:g} s"


def _holders(census: Census, keys: set[int]) -> dict[int, int]:
    """Where each of ``keys`` is among the graph's objects (the last record of an id wins)."""
    ids = census.graph.ids
    at = np.flatnonzero(np.isin(ids, np.fromiter(keys, np.uint64, len(keys))))
    return {int(ids[i]): int(i) for i in at.tolist()}


def _root_title(kind: str, label: str) -> str:
    if kind == "static" or not label:
        return kind
    return f"{kind}: {label}" if kind == "stack" else f"{label} {kind}"


def _via(census: Census, class_id: int, type_name: str, offset: int) -> str:
    if type_name.endswith("]"):  # an array: its elements follow the length (and padding)
        return f" [{(offset - 16) // 8}]" if offset >= 16 else ""
    name = census.fields.get(class_id, {}).get(offset)
    return f".{name}" if name else ""
