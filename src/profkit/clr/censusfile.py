"""Reading the native profiler's heap census (``PROFKIT_CLR_HEAP``).

``libprofkit_clr.so`` writes it at the runtime's Shutdown (or at ``--at``), after a GC it
forced: one UTF-8 text file of tab-separated records, first ``profkit-clr-heap<TAB>2``, last
``end`` (``csrc/census.c`` lists the records; docs/clr.md too), and the object graph in two
binary files beside it (:mod:`profkit.clr.censusgraph`). In short: ``graph`` the graph's
object and reference counts, ``r`` a root, ``t`` a class's totals, ``f`` a
field's name at an offset, ``s`` an object a static field holds, ``m`` a method holding
stack roots, ``gc`` the forced GC's HRESULT and time, ``names`` the naming's time, ``cut`` objects
left out, ``at`` (with ``--at``) the time asked for, the time taken and whether it was.

The object graph is kept up to :data:`MAX_GRAPH_OBJECTS` objects (the totals are always
whole): 32 bytes an object and 16 a reference in numpy arrays, so the native side's caps
(4,000,000 objects, 16,000,000 references) bound the reader at under 400 MB. Every field
is checked; a bad line is one :class:`~profkit.errors.FormatError` naming the file and the
line, a bad graph file one naming the file and the byte offset.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field

from profkit.clr.censusgraph import Graph, read_graph
from profkit.errors import FormatError

MAGIC = "profkit-clr-heap\t2"
#: objects of the graph kept for chains (the native side writes at most 4,000,000)
MAX_GRAPH_OBJECTS = 4_000_000
#: the root kinds of COR_PRF_GC_ROOT_KIND, by value
ROOT_KINDS = {0: "other", 1: "stack", 2: "finalizer", 3: "handle"}
#: COR_PRF_GC_ROOT_FLAGS of a handle root -> how a report names the handle
_HANDLE_FLAGS = ((1, "pinned"), (2, "weak"), (8, "ref-counted"))


@dataclass(frozen=True, slots=True)
class ClassTotal:
    """One class's share of the census; ``example`` is its largest object."""

    class_id: int
    name: str
    count: int
    bytes: int
    example: int


@dataclass(frozen=True, slots=True)
class Root:
    """A root: the object, its kind (static, stack, handle, finalizer, other) and a label
    (``Namespace.Type.Field``, the method whose frame holds it, the handle's kind)."""

    object_id: int
    kind: str
    label: str = ""


@dataclass(slots=True)
class Census:
    """What the census saw; ``graph``: the objects holding references, and theirs."""

    totals: list[ClassTotal] = field(default_factory=list)
    graph: Graph = field(default_factory=Graph.empty)
    roots: list[Root] = field(default_factory=list)
    #: class id -> offset in its objects -> field name
    fields: dict[int, dict[int, str]] = field(default_factory=dict)
    gc_status: int = 0  #: the forced GC's HRESULT (negative: it failed)
    gc_ns: int = 0  #: the forced GC and the walk, in nanoseconds
    names_ns: int = 0  #: naming types, fields, statics and methods after it
    cut: int = 0  #: objects left out of the graph (the file's cap and the reader's)
    #: ``--at``: the time asked for and the time taken, ns after the runtime's start; 0: none
    at_ns: int = 0
    taken_ns: int = 0
    timed: bool = False  #: taken at ``at_ns`` (False: the program ended first)
    _names: dict[int, str] | None = field(default=None, repr=False)

    def class_name(self, class_id: int) -> str:
        """The class's name (from its totals), or its id when it has none."""
        if self._names is None:
            self._names = {t.class_id: t.name for t in self.totals}
        return self._names.get(class_id, f"(class 0x{class_id:x})")


def _records(path: str) -> Iterator[tuple[int, list[str]]]:
    try:
        handle = open(path, encoding="utf-8", errors="replace", newline="\n")  # noqa: SIM115
    except OSError as exc:
        raise FormatError("unreadable", exc.strerror or str(exc), path=path) from None
    with handle:
        first = handle.readline().rstrip("\n")
        if first != MAGIC:
            raise FormatError("bad_magic", f"expected {MAGIC!r}", path=path, line=1)
        for number, text in enumerate(handle, start=2):
            if not text.endswith("\n"):
                raise FormatError("truncated", "the last line is cut short", path=path, line=number)
            fields = text[:-1].split("\t")
            yield number, fields
            if fields == ["end"]:
                return
    raise FormatError("truncated", "no 'end' record (the file was cut short)", path=path)


def _hex(text: str, path: str, line: int) -> int:
    try:
        if not text or len(text) > 16 or text[0] in "+-" or not text.isascii():
            raise ValueError
        return int(text, 16)
    except ValueError:
        raise FormatError(
            "malformed", f"{text[:40]!r} is not a hex number", path=path, line=line
        ) from None


def _dec(text: str, path: str, line: int) -> int:
    if not (text.isdigit() and text.isascii() and len(text) < 20):
        raise FormatError("malformed", f"{text[:40]!r} is not a number", path=path, line=line)
    return int(text)


_FIELDS = {
    "graph": 3, "r": 5, "t": 6, "f": 4, "s": 3, "m": 3, "gc": 3, "cut": 3, "names": 2, "at": 4, "end": 1,
}  # fmt: skip


def read_census(path: str, *, max_objects: int = MAX_GRAPH_OBJECTS) -> Census:
    """The census in ``path``; :class:`FormatError` for a file that is not one."""
    if os.path.isfile(path) and os.path.getsize(path) > (1 << 34):
        raise FormatError("too_large", "over 16 GiB", path=path)
    census = Census()
    roots: list[Root] = []
    statics: list[Root] = []
    methods: dict[int, str] = {}
    counts: list[int] = []
    for line, rec in _records(path):
        if _FIELDS.get(rec[0]) != len(rec):
            raise FormatError(
                "malformed", f"unknown or short record {rec[0][:20]!r}", path=path, line=line
            )
        if rec[0] == "graph":
            counts = [_dec(rec[1], path, line), _dec(rec[2], path, line)]
        else:
            _record(census, rec, path, line, roots, statics, methods)
    if not counts:
        raise FormatError("malformed", "no 'graph' record", path=path)
    census.graph, cut = read_graph(path, counts[0], counts[1], max_objects)
    census.cut += cut
    census.roots = statics + [_named(r, methods) for r in roots]
    return census


def _record(
    census: Census,
    rec: list[str],
    path: str,
    line: int,
    roots: list[Root],
    statics: list[Root],
    methods: dict[int, str],
) -> None:
    kind = rec[0]
    if kind == "r":
        flags = _dec(rec[3], path, line)
        root_kind = ROOT_KINDS.get(_dec(rec[2], path, line), "other")
        label = rec[4] if root_kind == "stack" else ""
        if root_kind == "handle":
            label = next((name for bit, name in _HANDLE_FLAGS if flags & bit), "strong")
        roots.append(Root(_hex(rec[1], path, line), root_kind, label))
    elif kind == "t":
        ids = [_hex(rec[i], path, line) for i in (1, 4)]
        counts = [_dec(rec[i], path, line) for i in (2, 3)]
        census.totals.append(ClassTotal(ids[0], rec[5], counts[0], counts[1], ids[1]))
    elif kind == "f":
        census.fields.setdefault(_hex(rec[1], path, line), {})[_hex(rec[2], path, line)] = rec[3]
    elif kind == "s":
        statics.append(Root(_hex(rec[1], path, line), "static", rec[2]))
    elif kind == "m":
        methods[_hex(rec[1], path, line)] = rec[2]
    elif kind == "gc":
        status = _hex(rec[1], path, line)
        census.gc_status = status - (1 << 32) if status >= 1 << 31 else status
        census.gc_ns = _dec(rec[2], path, line)
    elif kind == "names":
        census.names_ns = _dec(rec[1], path, line)
    elif kind == "cut":
        census.cut += _dec(rec[1], path, line)
    elif kind == "at":
        census.at_ns, census.taken_ns = _dec(rec[1], path, line), _dec(rec[2], path, line)
        census.timed = _dec(rec[3], path, line) == 1


def _named(root: Root, methods: dict[int, str]) -> Root:
    """A stack root's label is its method's id in the file: its name here."""
    if root.kind != "stack":
        return root
    try:
        fid = int(root.label, 16)
    except ValueError:
        return Root(root.object_id, root.kind)
    return Root(root.object_id, root.kind, methods.get(fid, ""))
