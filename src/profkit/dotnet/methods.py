"""Naming a sampled instruction pointer: the runtime's own method events, then R2R images.

The runtime says where each method's code is (``MethodLoadVerbose`` as it is compiled
during the session, ``MethodDCEndVerbose`` in the rundown at its end: start, size, the
declaring type and the method's name). An address outside those ranges may still be in a
ReadyToRun image's precompiled code (a framework method the rundown did not list): if the
image is mapped in the target, its method table (profkit's R2R reader, cached) names it.

Names are spelled as profkit's CLR profiler spells them (``Namespace.Outer+Inner`1.Method``,
generic methods ``Method``N``), so trace and sample profiles of one program line up.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Iterable

from profkit.formats.nettrace.clr_events import MethodEvent

#: a type's generic instantiation as the runtime writes it: ``List`1[System.Int32]``
_INSTANTIATION = re.compile(r"(`\d+)\[.*\]$")
UNKNOWN = "[unknown]"


def type_name(namespace: str) -> str:
    """The runtime's ``MethodNamespace`` (the full type name) in the profiler's spelling:
    instantiations dropped (``Dictionary`2[System.__Canon,...]`` -> ``Dictionary`2``)."""
    return _INSTANTIATION.sub(r"\1", namespace)


def method_name(namespace: str, name: str, signature: str = "") -> str:
    """``Type.Method``; a generic method (its signature says ``generic``) gets the
    profiler's ````N`` arity when the signature shows it (``!!0``...)."""
    full = f"{type_name(namespace)}.{name}" if namespace else name
    if signature.startswith("generic "):
        arity = len(set(re.findall(r"!!(\d+)", signature)))
        if arity:
            full += f"``{arity}"
    return full


def r2r_method_name(crossgen_name: str) -> str:
    """crossgen2's ``RetType Ns.Type[inst]::Method<T>(args)`` as ``Ns.Type.Method``."""
    head = crossgen_name.split("(", 1)[0]
    owner, sep, method = head.rpartition("::")
    if not sep:
        return head.rsplit(" ", 1)[-1]
    depth = 0
    cut = 0
    for i in range(len(owner) - 1, -1, -1):  # the owner starts after the return type's space
        c = owner[i]
        if c in "]>":
            depth += 1
        elif c in "[<":
            depth -= 1
        elif c == " " and depth == 0:
            cut = i + 1
            break
    owner = re.sub(r"(`\d+)[\[<].*$", r"\1", owner[cut:])
    generic = re.match(r"^([^<\[]+)[<\[](.*)[>\]]$", method)
    if generic:
        arity = generic.group(2).count(",") + 1
        method = f"{generic.group(1)}``{arity}"
    return f"{owner}.{method}"


class MethodTable:
    """Code ranges -> names, built from method events; later events win on overlap
    (code of an unloaded collectible assembly reused by another method)."""

    def __init__(self) -> None:
        self._ranges: dict[int, tuple[int, str]] = {}  # start -> (end, name)
        self._starts: list[int] = []
        self._ends: list[int] = []
        self._names: list[str] = []
        self._dirty = False
        #: images to try for addresses no event covers: (start, end, lookup)
        self._images: dict[int, tuple[int, Callable[[int], str | None]]] = {}

    def __len__(self) -> int:
        return len(self._ranges)

    def add(self, event: MethodEvent) -> None:
        if event.size == 0 or not event.name:
            return
        name = method_name(event.namespace, event.name, event.signature)
        self._ranges[event.start] = (event.start + event.size, name)
        self._dirty = True

    def add_if_new(self, event: MethodEvent) -> None:
        """Add unless a range already starts there (the session's own events are newer)."""
        if event.start not in self._ranges:
            self.add(event)

    def add_all(self, events: Iterable[MethodEvent]) -> None:
        for e in events:
            self.add(e)

    def add_image(self, start: int, end: int, lookup: Callable[[int], str | None]) -> None:
        """An image mapped at ``[start, end)`` whose ``lookup(address)`` names its code
        (one per start: adding it again keeps the first, already loaded, one)."""
        self._images.setdefault(start, (end, lookup))

    def ranges(self) -> list[tuple[int, str]]:
        """``(start, name)`` of every range the events gave, by address."""
        return [(start, name) for start, (_end, name) in sorted(self._ranges.items())]

    def _index(self) -> None:
        items = sorted(self._ranges.items())
        self._starts = [s for s, _ in items]
        self._ends = [e for _, (e, _n) in items]
        self._names = [n for _, (_e, n) in items]
        self._dirty = False

    def name(self, ip: int) -> str | None:
        """The method whose code holds ``ip`` (None: neither the runtime nor an image knows)."""
        if self._dirty:
            self._index()
        i = bisect.bisect_right(self._starts, ip) - 1
        if i >= 0 and ip < self._ends[i]:
            return self._names[i]
        for start, (end, lookup) in self._images.items():
            if start <= ip < end:
                return lookup(ip)
        return None
