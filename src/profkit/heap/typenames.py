"""Naming types without running the program's code, and naming sampled blocks by their words.

One helper for the whole heap package (:func:`type_name`, used by the heap walk and by the
allocation sampler) so a type is named the same way in every report, with one fallback,
:data:`UNNAMED`.
"""

from __future__ import annotations

import time
from collections.abc import Callable

TYPE_CHECKING = False  # typing's names for type checkers only: memory mode's start-up
if TYPE_CHECKING:  # imports no typing (its objects would sit in the program's tracked heap)
    from typing import Final

#: A type whose ``__module__`` / ``__qualname__`` could not be read as strings. Parenthesised
#: like ``(buffer)``: no real ``module.qualname`` looks like it.
UNNAMED: Final = "(unnamed type)"

_TYPE_MODULE = type.__dict__["__module__"]
_TYPE_QUALNAME = type.__dict__["__qualname__"]


def type_name(t: type) -> str:
    """``module.qualname`` as everywhere in profkit (builtins without the module), read
    through ``type``'s own descriptors: a metaclass property named ``__module__`` is the
    program's code, and must neither run nor fail us here."""
    try:
        module = _TYPE_MODULE.__get__(t, type)
        qual = _TYPE_QUALNAME.__get__(t, type)
    except Exception:
        return UNNAMED
    if not isinstance(qual, str):
        return UNNAMED
    if not isinstance(module, str) or module == "builtins":
        return qual
    return f"{module}.{qual}"


class TypeNames:
    """Names the type of a sampled object from the words its block held.

    The C hooks cannot ask an object its type while it is being allocated (it is not built
    yet), so they read the words where ``ob_type`` would be (at the block, after the GC
    header, after the 3.12+ pre-header) when the block is freed or the log drained. One of
    them is the type's address if the block was an object: it is kept only if it is the
    address of a type that exists (every type is reachable from ``object.__subclasses__``),
    so a buffer whose words happen to look like pointers is not given a type.

    Why the full walk of the types is rationed: object-allocator blocks that are not objects
    (dict key tables, for instance) never match, and walking ~1000 types (about a
    millisecond) for each of them made ``--mode memory`` at a 64 KiB mean twice as slow as
    the program (bench/memory_bench.py). A miss first looks at ``object``'s direct subclasses
    (one C call: most classes a program makes are there), at most once per batch; the full
    walk runs at most once per batch and at most :attr:`WALK_SHARE` of the time since the last one. So an instance
    of a class made moments ago under a base other than ``object`` can be named ``(buffer)``
    until the next full walk.

    Words that missed are remembered as known misses until the next full walk: a block whose
    words all missed before is ``(buffer)`` at once, with no scan and no walk, until
    :attr:`MISS_SHARE` of the time since the last walk has passed. Why: the same
    storage recurs (every ``{"k": i}`` has a key table whose words are the same small counts
    and the same key pointer), and rescanning ``object``'s subclasses in every batch and
    walking at the full share for it was most of memory mode's delivery cost (callgrind,
    bench/memory_bench's workload on 3.11: 45 M instructions of 83 M). The price: a class
    made at an address a known miss held (or under a base other than ``object`` and first
    seen when no walk was due) is ``(buffer)`` until the next walk: the next fresh miss brings
    it (rationed as above), a known one after :attr:`MISS_SHARE`'s longer wait.
    """

    BUFFER: Final = "(buffer)"
    #: an object-allocator block that holds no type: storage, not an object (bytearray
    #: contents, dict tables), or an object whose type is gone
    UNKNOWN: Final = "(buffer)"
    #: the full walk's share of the elapsed time, at most
    WALK_SHARE: Final = 0.02
    #: the share of the time walks made for known misses may take, at most
    MISS_SHARE: Final = 0.005

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self._names: dict[int, str] = {}
        #: words that were no type's address at the last look (cleared by a full walk)
        self._misses: set[int] = set()
        self._misses_until = float("-inf")
        self._walked_this_batch = False
        self._scanned_this_batch = False
        self._clock = clock
        self._next_walk_at = float("-inf")
        self.walks = 0  #: full walks so far (for tests and the bench)

    def name(self, domain: int, words: tuple[int, ...]) -> str:
        if domain == 0:
            return self.BUFFER
        found = self._lookup(words)
        if found is not None or not any(words):
            return found or self.UNKNOWN
        misses = self._misses
        for word in words:
            if word and word not in misses:
                break
        else:  # every word missed before: storage seen already, not a new type
            if self._clock() < self._misses_until:
                return self.UNKNOWN
        if not self._scanned_this_batch:
            self._scan(type.__subclasses__(object))
            found = self._lookup(words)
        if found is None and self._may_walk():
            self._walk()
            found = self._lookup(words)
        if found is None:
            self._misses.update(words)  # after a walk: the fresh set
        return found or self.UNKNOWN

    def new_batch(self) -> None:
        self._walked_this_batch = self._scanned_this_batch = False

    def _lookup(self, words: tuple[int, ...]) -> str | None:
        names = self._names
        for word in words:
            found = names.get(word)
            if found is not None:
                return found
        return None

    def _scan(self, types: list[type]) -> None:
        # every one renamed: an address may now hold a type other than the one named there
        self._scanned_this_batch = True
        names = self._names
        for t in types:
            names[id(t)] = type_name(t)

    def _may_walk(self) -> bool:
        return not self._walked_this_batch and self._clock() >= self._next_walk_at

    def _walk(self) -> None:
        began = self._clock()
        self._walked_this_batch = True
        self.walks += 1
        names: dict[int, str] = {}
        todo: list[type] = [object]
        while todo:
            t = todo.pop()
            if id(t) in names:
                continue
            names[id(t)] = type_name(t)
            todo.extend(type.__subclasses__(t))
        self._names = names
        self._misses = set()
        took = self._clock() - began
        self._next_walk_at = began + took / self.WALK_SHARE
        self._misses_until = began + took / self.MISS_SHARE
