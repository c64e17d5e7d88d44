"""Why is it alive: the top types of a heap walk by bytes, and one chain of references from
a root to an example of each.

A leak is rarely a mystery of *what* (the walk's totals say that) but of *who holds it*. The
CLR's ``RootReferences2`` exists so a tool can answer that; this module is the answer for
Python: a breadth-first search from the roots of one :func:`~profkit.heap.walk.walk_heap`
gives the shortest chain to each example object, roots taken in order of precedence (modules,
then frames, then locals, then objects no object refers to), so a module global is explained
as ``m.LEAKS -> list[3] -> m.Leak`` rather than through some incidental reference (the links
named by :mod:`profkit.heap.links`).

One forward search from all the roots answers every example at once, with one dict of ints
(the parent of each object reached) and a bound on the objects it visits; no reverse index
of the whole graph is built.

profkit's own objects are not the program's: :func:`take_snapshot` leaves out what only
profkit's modules hold (:func:`leave_out_own`), so ``profkit heap run`` neither counts
profkit's docstrings among the program's strings nor explains them by
``module profkit.runner -> dict -> str``.
"""

from __future__ import annotations

import sys
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from types import CodeType

from profkit.api.names import is_profkit_package
from profkit.heap.walk import FRAME, LOCAL, MODULE, UNREFERENCED, WalkStats, walk_heap

#: the order in which roots are searched from (earlier kinds win ties of length)
ROOT_ORDER = (MODULE, FRAME, LOCAL, UNREFERENCED)
#: objects a search visits at most before it gives up on the examples not yet reached
DEFAULT_MAX_NODES = 5_000_000


@dataclass(slots=True)
class HeapSnapshot:
    """The graph of one walk: ints and type names only, nothing of the program kept alive.

    ``objects[id] = (type_name, size, referenced_ids)``; ``roots[id] = kind``; ``labels``
    names some objects for people (a module root by its module name).
    """

    objects: dict[int, tuple[str, int, tuple[int, ...]]] = field(default_factory=dict)
    roots: dict[int, str] = field(default_factory=dict)
    labels: dict[int, str] = field(default_factory=dict)
    stats: WalkStats = field(default_factory=WalkStats)
    #: what was left out as profkit's own (:func:`leave_out_own`): objects and bytes
    own: WalkStats = field(default_factory=WalkStats)


class SnapshotRecorder:
    """The two walk callbacks, filling a :class:`HeapSnapshot` (usable as a profiler's
    ``object_references`` / ``root_references`` too).

    The snapshot is made at the first object, after the walk took its list of objects, so
    the recorder's own growing dicts are never part of the heap it describes.
    """

    def __init__(self) -> None:
        self.snapshot: HeapSnapshot | None = None

    def on_object(self, object_id: int, type_name: str, size: int, refs: tuple[int, ...]) -> None:
        if self.snapshot is None:
            self.snapshot = HeapSnapshot()
        self.snapshot.objects[object_id] = (type_name, size, refs)

    def on_roots(self, root_ids: tuple[int, ...], kinds: tuple[str, ...]) -> None:
        if self.snapshot is None:
            self.snapshot = HeapSnapshot()
        self.snapshot.roots.update(zip(root_ids, kinds, strict=True))


def take_snapshot(
    *, skip_code: Callable[[CodeType], bool] | None = None, own: bool = False
) -> HeapSnapshot:
    """Walk this process's heap now and keep the graph (see :func:`walk_heap`); profkit's
    own objects are left out unless ``own`` (:func:`leave_out_own`)."""
    recorder = SnapshotRecorder()
    stats = walk_heap(recorder.on_object, recorder.on_roots, skip_code=skip_code)
    snapshot = recorder.snapshot or HeapSnapshot()
    snapshot.stats = stats
    for name, module in list(sys.modules.items()):
        key = id(module)
        if snapshot.roots.get(key) == MODULE:
            snapshot.labels.setdefault(key, name)
    if not own:
        leave_out_own(snapshot)
    return snapshot


def leave_out_own(snapshot: HeapSnapshot) -> None:
    """Take out of ``snapshot`` profkit's modules and what only they hold.

    Reachability decides, not types or addresses: what any of the program's roots reaches
    without passing through one of profkit's modules (:func:`~profkit.api.names.
    is_profkit_package`) stays, even when profkit refers to it too (a string both hold,
    the program's own module); the rest of what profkit's modules reach goes, counted in
    ``snapshot.own`` and out of ``snapshot.stats``. (Searching from profkit's side alone
    would not do: profkit's runner holds the program's ``__main__``, whence all of it.)
    """
    objects = snapshot.objects
    walls = {key for key, name in snapshot.labels.items() if is_profkit_package(name)}
    walls &= objects.keys()
    if not walls:
        return
    # and their namespaces: a function's __globals__ leads there without the module
    walls |= {
        ref for key in walls for ref in objects[key][2] if objects.get(ref, _NONE)[0] == "dict"
    }
    kept = _reach((key for key in snapshot.roots if key not in walls), objects, walls)
    gone = _reach(walls, objects, kept)
    for key in gone:
        _, size, _ = objects.pop(key)
        snapshot.roots.pop(key, None)
        snapshot.labels.pop(key, None)
        snapshot.own.objects += 1
        snapshot.own.bytes += size
    snapshot.stats.objects -= snapshot.own.objects
    snapshot.stats.bytes -= snapshot.own.bytes


_NONE: tuple[str, int, tuple[int, ...]] = ("", 0, ())


def _reach(
    starts: Iterable[int], objects: dict[int, tuple[str, int, tuple[int, ...]]], avoid: set[int]
) -> set[int]:
    """Every object reachable from ``starts`` (in ``objects``) without entering ``avoid``."""
    seen = {key for key in starts if key in objects and key not in avoid}
    stack = list(seen)
    while stack:
        for ref in objects[stack.pop()][2]:
            if ref not in seen and ref not in avoid and ref in objects:
                seen.add(ref)
                stack.append(ref)
    return seen


@dataclass(frozen=True, slots=True)
class TypeTotal:
    """One type's share of a walk; ``example`` is its largest object (ties: first seen)."""

    type_name: str
    count: int
    bytes: int
    example: int


def top_types(snapshot: HeapSnapshot, n: int = 10) -> list[TypeTotal]:
    """The ``n`` types holding the most bytes (ties by name, for a stable report)."""
    totals: dict[str, list[int]] = {}  # name -> [count, bytes, example id, example size]
    for key, (type_name, size, _) in snapshot.objects.items():
        total = totals.get(type_name)
        if total is None:
            totals[type_name] = [1, size, key, size]
            continue
        total[0] += 1
        total[1] += size
        if size > total[3]:
            total[2], total[3] = key, size
    ranked = sorted(totals.items(), key=lambda item: (-item[1][1], item[0]))[:n]
    return [TypeTotal(name, t[0], t[1], t[2]) for name, t in ranked]


@dataclass(frozen=True, slots=True)
class Link:
    """One object on a chain."""

    object_id: int
    type_name: str
    label: str = ""  #: e.g. a module's name
    via: str = ""  #: how it holds the next link: ``.name``, ``['key']``, ``[3]``
    folded: bool = False  #: a namespace dict, shown as its owner's ``.name``

    def __str__(self) -> str:
        if self.label and self.via:  # a module: __main__.cache
            return self.label + self.via
        shown = f"{self.type_name} {self.label}" if self.label else self.type_name
        return shown + self.via


@dataclass(frozen=True, slots=True)
class Chain:
    """References from a root (``links[0]``, of ``root_kind``) to the object (``links[-1]``)."""

    root_kind: str
    links: tuple[Link, ...]

    def __str__(self) -> str:
        shown = (str(link) for link in self.links if not link.folded)
        return f"[{self.root_kind}] " + " -> ".join(shown)


def chains_to(
    snapshot: HeapSnapshot, targets: Iterable[int], *, max_nodes: int = DEFAULT_MAX_NODES
) -> dict[int, Chain]:
    """The shortest chain from a root to each target (breadth-first from every root,
    roots in :data:`ROOT_ORDER`). A target not reached within ``max_nodes`` objects, or not
    reachable at all, is missing from the answer."""
    wanted = {t for t in targets if t in snapshot.objects}
    if not wanted:
        return {}
    objects = snapshot.objects
    parent: dict[int, int] = {}  # object -> the object that reached it first (root: itself)
    queue: deque[int] = deque()
    rank = {kind: i for i, kind in enumerate(ROOT_ORDER)}
    for key, _ in sorted(snapshot.roots.items(), key=lambda kv: rank.get(kv[1], len(rank))):
        if key in objects and key not in parent:
            parent[key] = key
            queue.append(key)
    found: dict[int, Chain] = {}
    remaining = set(wanted)
    for key in list(parent):
        if key in remaining:
            remaining.discard(key)
            found[key] = _chain(snapshot, parent, key)
    while queue and remaining and len(parent) < max_nodes:
        key = queue.popleft()
        for ref in objects[key][2]:
            if ref in parent or ref not in objects:
                continue
            parent[ref] = key
            queue.append(ref)
            if ref in remaining:
                remaining.discard(ref)
                found[ref] = _chain(snapshot, parent, ref)
    return found


def _chain(snapshot: HeapSnapshot, parent: dict[int, int], target: int) -> Chain:
    path = [target]
    while parent[path[-1]] != path[-1]:
        path.append(parent[path[-1]])
    path.reverse()
    links = tuple(Link(k, snapshot.objects[k][0], snapshot.labels.get(k, "")) for k in path)
    return Chain(snapshot.roots[path[0]], links)


@dataclass(frozen=True, slots=True)
class TypeReport:
    """A top type and why its example is alive (``chain`` None: no root reaches it)."""

    total: TypeTotal
    chain: Chain | None


def why_alive(
    snapshot: HeapSnapshot,
    n: int = 10,
    *,
    max_nodes: int = DEFAULT_MAX_NODES,
    name_links: bool = True,
) -> list[TypeReport]:
    """The ``n`` types holding the most bytes, each with one chain from a root, its links
    named where the objects still live (:func:`named`)."""
    totals = _explained(snapshot, n)
    chains = chains_to(snapshot, (t.example for t in totals), max_nodes=max_nodes)
    if name_links:
        chains = named(chains, snapshot)
    return [TypeReport(t, chains.get(t.example)) for t in totals]


#: Fewest references an object needs to be weighed as a holder (see :func:`_explained`).
_MANY = 8


def _explained(snapshot: HeapSnapshot, n: int) -> list[TypeTotal]:
    """The ``n`` top types, each with the example whose chain explains it best: the
    largest object of that type in the object that refers to the most bytes of it.

    The type's largest object alone may say little: the biggest ``str`` is some module's
    docstring, while the program's 50,000 strings sit in one list (#25). Only objects with
    at least :data:`_MANY` references are weighed as holders (the rest could hold more
    than the type's largest object only by a little; skipping them keeps this pass short
    on a heap of millions), and a holder must hold more than that largest object.
    """
    totals = top_types(snapshot, n)
    objects = snapshot.objects
    # type -> (bytes to beat, example): at first the largest object alone
    best = {t.type_name: (objects[t.example][1], t.example) for t in totals}
    for _, _, refs in objects.values():
        if len(refs) < _MANY:
            continue
        held: dict[str, list[int]] = {}  # type -> [bytes, largest, its size]
        for ref in refs:
            found = objects.get(ref)
            if found is None or found[0] not in best:
                continue
            entry = held.get(found[0])
            if entry is None:
                held[found[0]] = [found[1], ref, found[1]]
            else:
                entry[0] += found[1]
                if found[1] > entry[2]:
                    entry[1], entry[2] = ref, found[1]
        for type_name, (size, example, _) in held.items():
            if size > best[type_name][0]:
                best[type_name] = (size, example)
    return [replace(t, example=best[t.type_name][1]) for t in totals]


def named(chains: dict[int, Chain], snapshot: HeapSnapshot) -> dict[int, Chain]:
    """The chains with their links named (``__main__.cache -> dict['k7'] -> bytearray``)
    where the objects still live in this process (see :mod:`profkit.heap.links`); a chain
    whose objects are gone, or were never this process's, stays as it was."""
    from profkit.heap import links

    paths = {target: [link.object_id for link in chain.links] for target, chain in chains.items()}
    found = links.find_paths(paths, snapshot.roots)
    out = dict(chains)
    for target, objects in found.items():
        via, folded = links.accessors(objects)
        chain = chains[target]
        renamed = [
            Link(
                link.object_id,
                link.type_name,
                link.label or links.module_name(objects[i]) or "",
                via[i],
                folded[i],
            )
            if i < len(objects)
            else link
            for i, link in enumerate(chain.links)
        ]
        out[target] = Chain(chain.root_kind, tuple(renamed))
    return out


def format_report(reports: list[TypeReport]) -> str:
    """The report as text, one type and its chain per entry (for the CLI)."""
    lines: list[str] = []
    for r in reports:
        t = r.total
        lines.append(f"{t.bytes:>12,} B {t.count:>9,}  {t.type_name}")
        lines.append("      " + (str(r.chain) if r.chain else "(no chain from a root)"))
    return "\n".join(lines) + ("\n" if lines else "")
