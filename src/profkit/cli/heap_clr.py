"""`profkit heap run app.dll ARGS`: the .NET half of `heap run`.

The census comes from :mod:`profkit.clr.census`; the chains are found by the same search
as a Python script's (:func:`profkit.heap.why_alive.chains_to`, roots in the order
static, stack, finalizer, handle, other) and printed by the same
:func:`~profkit.heap.why_alive.format_report`, each link named: a static root as
``Namespace.Type.Field``, a stack root by its method, a handle by its kind, a field by
its name and an array element by its index.
"""

from __future__ import annotations

import tempfile
from typing import cast

from profkit.clr.censusfile import Census, ClassTotal, ref_offsets
from profkit.engine.contract import Outcome
from profkit.heap.why_alive import (
    Chain,
    HeapSnapshot,
    Link,
    TypeReport,
    TypeTotal,
    chains_to,
    format_report,
)

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
        return census_report(outcome.census, path, top), outcome.ended


def census_report(census: Census, path: str, top: int) -> str:
    """The report of one census (``path``: its file, read again to name the fields)."""
    objects = sum(t.count for t in census.totals)
    size = sum(t.bytes for t in census.totals)
    text = (
        f"profkit heap: {objects:,} objects, {size:,} bytes (.NET, after a full GC{_when(census)}; "
        f"census took {census.gc_ns / 1e6:.1f} ms, naming {census.names_ns / 1e6:.1f} ms)\n"
    )
    if census.cut:
        text += f"profkit heap: {census.cut:,} objects left out of the reference graph (cap): chains may be missing\n"
    ranked = sorted(census.totals, key=lambda t: (-t.bytes, t.name))[:top]
    snapshot = _snapshot(census, ranked)
    chains = chains_to(snapshot, (t.example for t in ranked))
    chains = _named_chains(census, path, chains)
    reports = [
        TypeReport(TypeTotal(t.name, t.count, t.bytes, t.example), chains.get(t.example))
        for t in ranked
    ]
    return text + format_report(reports)


def _when(census: Census) -> str:
    """When an ``--at`` census was taken ("" for the end's census without ``--at``)."""
    if not census.at_ns:
        return ""
    if census.timed:
        return f" forced at {census.taken_ns / 1e9:.1f} s"
    return f" at the program's end, {census.taken_ns / 1e9:.1f} s: it ended before {census.at_ns / 1e9:g} s"


def _snapshot(census: Census, ranked: list[ClassTotal]) -> HeapSnapshot:
    """The census as a snapshot to search. Its objects are the census's own dict, class ids
    where a Python snapshot has type names (a copy of a million tuples saved): the chains'
    links are given their names by :func:`_named_chains`."""
    objects = cast(dict[int, tuple[str, int, tuple[int, ...]]], census.objects)
    snapshot = HeapSnapshot(objects=objects)
    for t in ranked:
        census.objects.setdefault(t.example, (t.class_id, 0, ()))
    rank = {kind: i for i, kind in enumerate(ROOT_ORDER)}
    for root in sorted(census.roots, key=lambda r: rank.get(r.kind, len(rank))):
        if root.object_id not in snapshot.roots:
            snapshot.roots[root.object_id] = _root_title(root.kind, root.label)
            census.objects.setdefault(root.object_id, (0, 0, ()))
            if root.kind == "static":
                snapshot.labels[root.object_id] = root.label
    return snapshot


def _root_title(kind: str, label: str) -> str:
    if kind == "static" or not label:
        return kind
    return f"{kind}: {label}" if kind == "stack" else f"{label} {kind}"


def _named_chains(census: Census, path: str, chains: dict[int, Chain]) -> dict[int, Chain]:
    """The chains with each link's way of holding the next named (``._items``, `` [3]``)."""
    pairs = {
        (chain.links[i].object_id, chain.links[i + 1].object_id)
        for chain in chains.values()
        for i in range(len(chain.links) - 1)
    }
    offsets = ref_offsets(path, pairs) if pairs else {}
    out: dict[int, Chain] = {}
    for target, chain in chains.items():
        links = list(chain.links)
        for i, link in enumerate(links):
            class_id = census.objects[link.object_id][0]
            name = census.class_name(class_id) if class_id else "(object)"
            offset = (
                offsets.get((link.object_id, links[i + 1].object_id))
                if i + 1 < len(links)
                else None
            )
            via = _via(census, class_id, name, offset) if offset is not None else ""
            if link.label and not via:  # a static field's object, the example itself
                name, via = link.label, ""
                links[i] = Link(link.object_id, name)
            else:
                links[i] = Link(link.object_id, name, link.label, via)
        out[target] = Chain(chain.root_kind, tuple(links))
    return out


def _via(census: Census, class_id: int, type_name: str, offset: int) -> str:
    if type_name.endswith("]"):  # an array: its elements follow the length (and padding)
        return f" [{(offset - 16) // 8}]" if offset >= 16 else ""
    name = census.fields.get(class_id, {}).get(offset)
    return f".{name}" if name else ""
