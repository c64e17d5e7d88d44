"""Names for the links of a "why is it alive" chain: ``__main__.cache -> dict['k7'] -> bytearray``.

A chain of :mod:`~profkit.heap.why_alive` is a path of object ids through one walk's graph.
``module __main__ -> dict -> dict -> bytearray`` says *what* holds the bytes, not *which*
variable: a user needs ``__main__.cache['k7']`` (issue 24, item 3), as objgraph-style
tools give. The graph keeps ints only (nothing of the program alive), so the names are
found afterwards, while the objects still live: from the chain's root (a module of
``sys.modules``, a thread's frame, or a tracked object), each next object is looked up
among the referents of the one before it *by identity*, so an id reused since the walk
cannot lend its name to a stranger — the naming just stops there.

What names a link (the accessor from one object to the next):

* a module's or an instance's namespace dict is folded into its owner: ``.name``;
* a dict's value by its key, when the key is a ``str``/``int``/``float``/``bytes``/``bool``/
  ``None`` and its ``repr`` is at most :data:`MAX_KEY_CHARS` characters (else ``[...]``);
* a list's or tuple's item by its index.

As in the walk, no program code runs: keys are matched by identity and only built-in
types' ``repr`` is taken; nothing is hashed or compared.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterable
from types import FrameType, GetSetDescriptorType, ModuleType
from typing import Any

from profkit.heap.walk import FRAME, MODULE, referents_of

#: Longest dict key shown (its ``repr``); a longer one reads ``[...]``.
MAX_KEY_CHARS = 40
_SAFE_KEYS = (str, int, float, bytes, bool, type(None))
_module_dict: Any = vars(ModuleType)["__dict__"]
_type_mro: Any = vars(type)["__mro__"]
_type_dict: Any = vars(type)["__dict__"]


def find_paths(paths: dict[int, list[int]], root_kinds: dict[int, str]) -> dict[int, list[object]]:
    """For each ``target: [root id, ..., target id]``, the live objects along it, as far as
    they are found (at least the root, else the target is left out)."""
    roots = _roots({path[0] for path in paths.values()}, root_kinds)
    found: dict[int, list[object]] = {}
    for target, path in paths.items():
        root = roots.get(path[0])
        if root is None:
            continue
        objects = [root]
        for key in path[1:]:
            nxt = _referent(objects[-1], key)
            if nxt is None:
                break
            objects.append(nxt)
        found[target] = objects
    return found


def accessors(objects: list[object]) -> tuple[list[str], list[bool]]:
    """For a path of live objects: the accessor each one shows towards the next (``""``:
    none known), and which are namespaces folded into their owner."""
    via = [""] * len(objects)
    folded = [False] * len(objects)
    for i in range(len(objects) - 1):
        parent, child = objects[i], objects[i + 1]
        if not folded[i] and _is_namespace(parent, child):
            folded[i + 1] = True
            continue
        owner = i - 1 if folded[i] else i
        if folded[i]:
            key = _key_of(parent, child)
            via[owner] = f".{key}" if isinstance(key, str) and key.isidentifier() else ""
            if via[owner] == "" and key is not None:
                via[owner] = f".__dict__[{_shown(key)}]"
        elif type(parent) is dict:
            key = _key_of(parent, child)
            via[i] = "" if key is None else f"[{_shown(key)}]"
        elif type(parent) in (list, tuple):
            index = _index_of(parent, child)  # type: ignore[arg-type]
            via[i] = "" if index is None else f"[{index}]"
        elif not issubclass(type(parent), (dict, list, tuple, type, ModuleType, FrameType)):
            name = _attribute_of(parent, child)
            via[i] = f".{name}" if name is not None else ""
    return via, folded


def module_name(obj: object) -> str | None:
    """A module's ``__name__`` (read from its dict: no ``__getattr__`` runs), else None."""
    # type(), not isinstance: a proxy whose __class__ says "module" (lazy importers put
    # them in sys.modules) is no module to the C descriptor
    if not issubclass(type(obj), ModuleType):
        return None
    name = _module_dict.__get__(obj).get("__name__")
    return name if type(name) is str else None


def _roots(wanted: set[int], kinds: dict[int, str]) -> dict[int, object]:
    """The live objects of the wanted root ids (modules, frames, tracked objects)."""
    found: dict[int, object] = {}
    kinds_wanted = {kinds.get(key) for key in wanted}
    if MODULE in kinds_wanted:
        for module in list(sys.modules.values()):
            if id(module) in wanted:
                found[id(module)] = module
    if FRAME in kinds_wanted:
        for top in list(sys._current_frames().values()):
            frame: FrameType | None = top
            while frame is not None:
                if id(frame) in wanted:
                    found[id(frame)] = frame
                frame = frame.f_back
    if wanted - found.keys():  # unreferenced roots, a module no longer in sys.modules
        for obj in gc.get_objects():
            if id(obj) in wanted:
                found[id(obj)] = obj
    return found


def _referent(obj: object, key: int) -> object | None:
    for ref in referents_of(obj):
        if id(ref) == key:
            return ref
    return None


def _is_namespace(owner: object, child: object) -> bool:
    """Whether ``child`` is ``owner``'s attribute dict (a module's, an instance's)."""
    if type(child) is not dict:
        return False
    if issubclass(type(owner), ModuleType):
        return child is _module_dict.__get__(owner)
    if issubclass(type(owner), (dict, list, tuple, type, FrameType)):
        return False
    # an instance's referent dict whose keys are all names: its __dict__ (reading the
    # attribute itself could create one where the object keeps its values inline)
    return all(type(k) is str for k in dict.keys(child))


def _attribute_of(obj: object, value: object) -> str | None:
    """The attribute name under which an instance keeps ``value`` in its own values (3.11+
    keeps them inline, with no dict to walk). Read through the class's C ``__dict__``
    getter only (no Python descriptor runs); it makes the instance's dict, as ``vars()``
    would: done for one object of each chain, once the walk is over."""
    for klass in _type_mro.__get__(type(obj)):
        descriptor = _type_dict.__get__(klass).get("__dict__")
        if descriptor is None:
            continue
        if type(descriptor) is not GetSetDescriptorType:
            return None
        try:
            namespace = descriptor.__get__(obj, type(obj))
        except Exception:
            return None
        if type(namespace) is not dict:
            return None
        key = _key_of(namespace, value)
        return key if isinstance(key, str) and key.isidentifier() else None
    return None


def _key_of(mapping: Any, value: object) -> object | None:
    """The key under which ``mapping`` holds ``value`` (identity), if a safe one."""
    key: object
    held: object
    for key, held in dict.items(mapping):
        if held is value:
            return key if type(key) in _SAFE_KEYS else None
    return None


def _index_of(sequence: Iterable[object], value: object) -> int | None:
    for index, held in enumerate(sequence):
        if held is value:
            return index
    return None


def _shown(key: object) -> str:
    text = repr(key)  # a built-in type's repr: C code only
    return text if len(text) <= MAX_KEY_CHARS else "..."
