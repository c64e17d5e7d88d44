"""A walk of the Python heap as the cyclic GC sees it (``ObjectReferences`` / ``RootReferences2``).

The CLR hands a profiler the heap graph after a collection so a tool can say *why* an object
is alive. CPython has no such callback, but the GC can list what it tracks
(:func:`gc.get_objects`) and what each of those refers to (:func:`gc.get_referents`, the
type's C ``tp_traverse``). :func:`walk_heap` turns that into two streams:

* ``on_object(object_id, type_name, size, referenced_ids)`` once per object: every object the
  GC tracks, plus every untracked object reachable from one (``str``, ``int``, ``bytes``,
  ``bytearray``, untracked tuples and dicts), so the bytes of leaves are counted too;
* ``on_roots(root_ids, kinds)`` once, after the objects: the modules in ``sys.modules``
  (``"module"``), the frames of every thread (``"frame"``) and their locals (``"local"``;
  before 3.13 only where reading them leaves no trace, see :func:`_locals_readable`),
  and the tracked objects no tracked object refers to (``"unreferenced"``: held from C, such
  as ``sys.modules`` itself, or by nothing but the walk's own snapshot).

Why it is written this way:

* **No program code runs.** Objects are known by ``id()`` only; nothing is hashed or compared
  (a user's ``__eq__``/``__hash__`` never runs), type names are read through ``type``'s own
  descriptors (a metaclass property cannot run), and a ``__sizeof__`` written in Python is not
  called: such an object is given its C size (``object.__sizeof__``) plus the GC header.
* **Nothing is kept alive.** The snapshot list of :func:`gc.get_objects` is the only strong
  reference the walk holds, and it is dropped before :func:`walk_heap` returns; the callbacks
  get ints and strings.
* **No collection runs during the walk** (``gc.disable`` and back), so the profiler's own
  new containers are not chased; objects made after the snapshot appear only as untracked
  leaves of objects in it, each once.
* **Bounded memory.** Besides the snapshot, the walk keeps two sets of ints (seen and
  referenced) and a queue of untracked objects waiting to be visited.
* **Ids are addresses, valid only during the walk.** Once the walk returns, an object may die
  and its address be reused. They are not the sample ids of ``object_allocated`` (see
  ``docs/heap.md``).
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from types import CodeType, FrameType, ModuleType
from typing import Final

from profkit.heap.typenames import type_name

#: Root kinds, in the order of precedence when one object is a root for several reasons.
MODULE: Final = "module"
FRAME: Final = "frame"
LOCAL: Final = "local"
UNREFERENCED: Final = "unreferenced"

ObjectCallback = Callable[[int, str, int, tuple[int, ...]], None]
RootsCallback = Callable[[tuple[int, ...], tuple[str, ...]], None]

_PROFKIT_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class made by a class statement (or type())
_type_mro = type.__dict__["__mro__"]
_type_dict = type.__dict__["__dict__"]
_type_flags = type.__dict__["__flags__"]
_GC_HEADER = sys.getsizeof([]) - [].__sizeof__()
_CO_OPTIMIZED = 0x0001  # inspect.CO_OPTIMIZED: a function's frame (fast locals)
_PROXY_LOCALS = sys.version_info >= (3, 13)  # f_locals is a write-through view (PEP 667)


def _is_profkit(code: CodeType) -> bool:
    return code.co_filename.startswith(_PROFKIT_DIR)


@dataclass(slots=True)
class WalkStats:
    """What one walk saw (for reports and tests)."""

    objects: int = 0  #: objects delivered
    bytes: int = 0  #: sum of their sizes
    roots: int = 0  #: roots delivered
    size_failures: int = 0  #: objects whose size could not be read (given 0 bytes)


@dataclass(slots=True)
class _Types:
    """Per-type answers, cached by the type's id for one walk (types stay alive meanwhile)."""

    names: dict[int, str] = field(default_factory=dict)
    safe_sizeof: dict[int, bool] = field(default_factory=dict)

    def name(self, t: type) -> str:
        key = id(t)
        found = self.names.get(key)
        if found is None:
            found = self.names[key] = type_name(t)
        return found

    def sizeof_is_c(self, t: type) -> bool:
        """Whether ``sys.getsizeof`` on an instance runs only C code (no ``__sizeof__``
        written in Python anywhere on the MRO before the C one)."""
        key = id(t)
        found = self.safe_sizeof.get(key)
        if found is None:
            found = self.safe_sizeof[key] = _sizeof_is_c(t)
        return found


def _sizeof_is_c(t: type) -> bool:
    try:
        for klass in _type_mro.__get__(t):
            if "__sizeof__" in _type_dict.__get__(klass):  # a str key: no user hash runs
                return not _type_flags.__get__(klass) & _HEAPTYPE
    except Exception:
        return False
    return False


def _size(obj: object, t: type, types: _Types, stats: WalkStats) -> int:
    """``sys.getsizeof`` when only C answers it, else the C size plus the GC header."""
    try:
        if types.sizeof_is_c(t):
            return sys.getsizeof(obj)
        return object.__sizeof__(obj) + (_GC_HEADER if gc.is_tracked(obj) else 0)
    except Exception:
        stats.size_failures += 1
        return 0


def _locals_readable(code: CodeType) -> bool:
    """Whether reading ``f_locals`` leaves the frame as it was.

    Before 3.13 (PEP 667), ``f_locals`` of a function's frame copies its fast locals into a
    dict stored *in the frame*, which keeps every value alive until the function returns or
    reads its locals again: the walk would keep objects alive. There, only namespaces that
    are real dicts (module and class bodies without cells) are read; an object held only
    by a function's local is an ``"unreferenced"`` root instead of a ``"local"`` one.
    """
    if _PROXY_LOCALS:
        return True
    return not (code.co_flags & _CO_OPTIMIZED or code.co_cellvars or code.co_freevars)


def _frames(skip: Callable[[CodeType], bool]) -> tuple[list[FrameType], list[object], set[int]]:
    """The frames of every thread and their locals (strong references, dropped by the
    caller), and the ids of the frames skipped (the walk's own and ``skip``'s)."""
    frames: list[FrameType] = []
    locals_: list[object] = []
    skipped: set[int] = set()
    tops = list(sys._current_frames().values())
    for top in tops:
        frame: FrameType | None = top
        while frame is not None:
            if skip(frame.f_code):
                skipped.add(id(frame))
            else:
                frames.append(frame)
                if _locals_readable(frame.f_code):
                    with contextlib.suppress(Exception):  # a frame finishing meanwhile
                        locals_.extend(list(frame.f_locals.values()))  # one C call: atomic
            frame = frame.f_back
    return frames, locals_, skipped


def walk_heap(
    on_object: ObjectCallback,
    on_roots: RootsCallback,
    *,
    skip_code: Callable[[CodeType], bool] | None = None,
) -> WalkStats:
    """Deliver every object the GC can reach and then the roots (see the module docstring).

    ``skip_code(code)`` names frames that are not the program's (profkit's own always are):
    they are neither roots nor objects, and their locals are not roots. A callback that
    raises stops the walk; the exception propagates (the caller applies its failure rule).
    """
    # The snapshot first: the walk's own containers, made after it, are not in it.
    snapshot = gc.get_objects()
    # No collection while walking: one would untrack the tuples the profiler builds from
    # what it is given (all ints), and the walk would then chase its own output through
    # the profiler's containers. The program's setting is restored as it was.
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _walk(snapshot, on_object, on_roots, skip_code)
    finally:
        snapshot.clear()  # the only strong references the walk held
        del snapshot
        if enabled:
            gc.enable()


def _walk(
    snapshot: list[object],
    on_object: ObjectCallback,
    on_roots: RootsCallback,
    skip_code: Callable[[CodeType], bool] | None,
) -> WalkStats:
    def skip(code: CodeType) -> bool:
        return _is_profkit(code) or (skip_code is not None and skip_code(code))

    stats = WalkStats()
    types = _Types()
    frames, locals_, skipped = _frames(skip)
    frame_ids = [id(f) for f in frames]
    local_ids = [id(v) for v in locals_]
    # not the program's: the walk's own frames and the callbacks the caller made for it
    seen: set[int] = {id(on_object), id(on_roots), *skipped}
    referenced: set[int] = set()
    visited: list[int] = []  #: the objects not reached as untracked leaves
    pending: list[object] = []
    # frames and locals made after the snapshot (frames of other threads are created on
    # demand by sys._current_frames) are objects too, so every root is also an object
    for group in (snapshot, frames, locals_):
        for obj in group:
            key = id(obj)
            if key in seen:
                continue
            seen.add(key)
            visited.append(key)
            _visit(obj, key, on_object, types, stats, seen, referenced, pending)
            while pending:  # untracked leaves reached from it (strs, ints, bytes...)
                leaf = pending.pop()
                _visit(leaf, id(leaf), on_object, types, stats, seen, referenced, pending)
            del obj
    frames.clear()
    locals_.clear()
    kinds: dict[int, str] = {}
    for key in [id(m) for m in list(sys.modules.values())]:
        kinds.setdefault(key, MODULE)
    for key in frame_ids:
        kinds.setdefault(key, FRAME)
    for key in local_ids:
        kinds.setdefault(key, LOCAL)
    for key in visited:
        if key not in referenced:
            kinds.setdefault(key, UNREFERENCED)
    stats.roots = len(kinds)
    on_roots(tuple(kinds), tuple(kinds.values()))
    return stats


def _visit(
    obj: object,
    key: int,
    on_object: ObjectCallback,
    types: _Types,
    stats: WalkStats,
    seen: set[int],
    referenced: set[int],
    pending: list[object],
) -> None:
    t = type(obj)
    try:
        referents = _referents(obj, t)
    except Exception:
        referents = []
    refs = tuple(id(r) for r in referents)
    referenced.update(refs)
    for r in referents:
        rid = id(r)
        if rid not in seen and not gc.is_tracked(r):
            seen.add(rid)
            pending.append(r)
    del referents
    size = _size(obj, t, types, stats)
    stats.objects += 1
    stats.bytes += size
    on_object(key, types.name(t), size, refs)


#: CPython 3.12.0-3.12.5 (gh-122695): the ``_asyncio`` module's traverse visits its free list
#: of dead future iterators, so ``gc.get_referents`` hands them out with a reference, and
#: dropping that list deallocates them a second time: the free list becomes a cycle and the
#: program's next collection never ends. That module's referents are its ``__dict__`` here.
_ASYNCIO_TRAVERSE_REVIVES_THE_DEAD: Final = (3, 12, 0) <= sys.version_info[:3] < (3, 12, 6)


def referents_of(obj: object) -> list[object]:
    """What ``obj`` refers to, as the walk reads it (``gc.get_referents``, one CPython bug
    worked around); for naming the links of a chain afterwards."""
    return _referents(obj, type(obj))


def _referents(obj: object, t: type) -> list[object]:
    if (
        _ASYNCIO_TRAVERSE_REVIVES_THE_DEAD
        and t is ModuleType
        and obj.__dict__.get("__name__") == "_asyncio"
    ):
        return [obj.__dict__]
    return gc.get_referents(obj)
