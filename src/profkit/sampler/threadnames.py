"""``threading``'s thread names, read from the target: ``threading._active[ident]._name``.

Why: CPython before 3.14 does not give ``threading`` names to the kernel, so every thread
of a sampled program was named after the process ("python3"); py-spy shows ``w1``, ``w2``
(findings N6). The names live in Python objects, so they are read the way py-spy reads
them: ``sys.modules`` (from the interpreter state) → the ``threading`` module's dict →
``_active`` (thread ident → Thread) → the Thread's ``_name``.

Every step is a bounded read of a structure the running target may be changing: dicts
of at most ``MAX_ENTRIES`` entries, strings of at most ``MAX_NAME`` characters, and any
failure (a torn read, an unexpected shape, a layout without the fields) gives ``None``,
and the caller keeps the kernel's name. Instance attributes of 3.11+ are usually not in
a dict of their own but in "values" beside the object, with the keys shared in the
class (``ht_cached_keys``): 3.11 keeps a values pointer four words before the object,
3.12 a tagged dict-or-values word three words before it (values - 1), 3.13 the values inline after
the object's ``tp_basicsize`` bytes; a materialized ``__dict__`` is read as a dict.
"""

from __future__ import annotations

import struct

from profkit.sampler.errors import AttachError
from profkit.sampler.layout import Layout
from profkit.sampler.memory import Memory

MAX_ENTRIES = 1 << 15  #: entries of one dict read (sys.modules has hundreds)
MAX_NAME = 256
_u64 = struct.Struct("<Q").unpack_from
_KEYS_HEADER = (
    32  # PyDictKeysObject: refcnt, log2 size/index bytes, kind, version, usable, nentries
)
_GENERAL, _UNICODE, _SPLIT = 0, 1, 2  # dk_kind


class ThreadNames:
    """``threading`` names of one process's threads, by ``threading.get_ident()``."""

    def __init__(self, mem: Memory, layout: Layout, interp: int, minor: int) -> None:
        self.mem = mem
        self.lay = layout
        self.interp = interp
        self.minor = minor  #: 11, 12 or 13: where an instance's values are
        self._active = 0  #: threading._active (a dict never rebound), once found
        self._slots: dict[tuple[int, str], int] = {}  #: (shared keys, name) → index

    @property
    def usable(self) -> bool:
        lay = self.lay
        return bool(lay.interp_modules and lay.dict_keys and lay.module_dict and lay.type_basicsize)

    def name(self, ident: int) -> str | None:
        """The ``name`` of the Thread whose ident is ``ident``, None when not found."""
        if not self.usable or not ident:
            return None
        try:
            if not self._active:
                modules = self.mem.u64(self.interp + self.lay.interp_modules)
                module = self._lookup_str(modules, "threading") if modules else 0
                if not module:
                    return None
                namespace = self.mem.u64(module + self.lay.module_dict)
                self._active = self._lookup_str(namespace, "_active")
            thread = self._lookup_int(self._active, ident) if self._active else 0
            return self._attribute_str(thread, "_name") if thread else None
        except (AttachError, ValueError, UnicodeDecodeError):
            return None

    # ---- dicts -------------------------------------------------------------------------

    def _entries(self, keys: int) -> tuple[int, list[tuple[int, int, int]]]:
        """(kind, [(hash, key, value)]) of a dict-keys object; hash 0 for unicode kinds."""
        head = self.mem.read(keys, _KEYS_HEADER)
        log2_size, log2_index_bytes, kind = head[8], head[9], head[10]
        nentries = _u64(head, 24)[0]
        if kind not in (_GENERAL, _UNICODE, _SPLIT) or log2_size > 30 or log2_index_bytes > 32:
            raise ValueError("not a dict-keys object")
        if not nentries:
            return kind, []
        if nentries > MAX_ENTRIES:
            raise ValueError("dict too large")
        at = keys + _KEYS_HEADER + (1 << log2_index_bytes)
        if kind == _GENERAL:
            raw = self.mem.read(at, 24 * nentries)
            return kind, [_unpack3(raw, i * 24) for i in range(nentries)]
        raw = self.mem.read(at, 16 * nentries)
        return kind, [(0, *struct.unpack_from("<QQ", raw, i * 16)) for i in range(nentries)]

    def _dict_items(self, d: int) -> list[tuple[int, int, int]]:
        """(hash, key, value) of a dict object (split dicts: values from ma_values)."""
        lay = self.lay
        keys = self.mem.u64(d + lay.dict_keys)
        values = self.mem.u64(d + lay.dict_values)
        _, entries = self._entries(keys)
        if not values:
            return entries
        # 3.13's PyDictValues starts with capacity/size/embedded/valid bytes, then the
        # values; before it, it is the array of values itself.
        return self._with_values(entries, values + (8 if self.minor >= 13 else 0))

    def _with_values(
        self, entries: list[tuple[int, int, int]], values: int
    ) -> list[tuple[int, int, int]]:
        """Split-table entries with their values from a values array."""
        if not entries:
            return []
        raw = self.mem.read(values, 8 * len(entries))
        return [(h, k, _u64(raw, 8 * i)[0]) for i, (h, k, _) in enumerate(entries)]

    def _lookup_str(self, d: int, key: str) -> int:
        for _, k, v in self._dict_items(d):
            if k and v and self._string(k) == key:
                return v
        return 0

    def _lookup_int(self, d: int, key: int) -> int:
        """The value for an int key: CPython's hash of a non-negative int below 2**61-1 is
        the int itself, so thread idents are matched by their hash without reading keys."""
        for h, k, v in self._dict_items(d):
            if k and v and h == key:
                return v
        return 0

    # ---- objects -----------------------------------------------------------------------

    def _attribute_str(self, obj: int, name: str) -> str | None:
        value = self._attribute(obj, name)
        return self._string(value) if value else None

    def _attribute(self, obj: int, name: str) -> int:
        """An instance attribute of a plain Python object (managed dict or values)."""
        lay, mem = self.lay, self.mem
        if self.minor == 11:
            materialized = mem.u64(obj - 24)
            if materialized:
                return self._lookup_str(materialized, name)
            values = mem.u64(obj - 32)
        elif self.minor == 12:
            word = mem.u64(obj - 24)
            if not word & 1:
                return self._lookup_str(word, name) if word else 0
            values = word + 1  # stored as values - 1 (the tag bit)
        else:
            materialized = mem.u64(obj - 24)
            if materialized:
                return self._lookup_str(materialized, name)
            cls = mem.u64(obj + lay.object_type)
            basicsize = mem.u64(cls + lay.type_basicsize)
            if not 0 < basicsize <= 1 << 16:
                return 0
            header = mem.read(obj + basicsize, 8)
            if not header[3]:  # PyDictValues.valid
                return 0
            values = obj + basicsize + 8
        if not values or not lay.heaptype_cached_keys:
            return 0
        cls = mem.u64(obj + lay.object_type)
        keys = mem.u64(cls + lay.heaptype_cached_keys)
        if not keys:
            return 0
        slot = self._slots.get((keys, name))
        if slot is not None:  # still that key there? (keys freed and reused: look again)
            _, entries = self._entries(keys)
            if slot < len(entries) and self._string(entries[slot][1]) == name:
                return mem.u64(values + 8 * slot)
        _, entries = self._entries(keys)
        for i, (_, k, _) in enumerate(entries):
            if k and self._string(k) == name:
                if len(self._slots) < 1024:
                    self._slots[(keys, name)] = i
                return mem.u64(values + 8 * i)
        return 0

    def _string(self, address: int) -> str | None:
        """A compact str of the target (names and keys are; not cached: a name may change
        and a freed string's address be reused)."""
        lay = self.lay
        raw = self.mem.read(address, lay.unicode_ascii_size)
        length = _u64(raw, lay.unicode_length)[0]
        state = int.from_bytes(raw[lay.unicode_state : lay.unicode_state + 4], "little")
        text: str | None = None
        compact = (state >> lay.unicode_compact_bit) & 1
        if compact and (state >> lay.unicode_ascii_bit) & 1 and length <= MAX_NAME:
            text = self.mem.read(address + lay.unicode_ascii_size, length).decode("ascii")
        elif compact and length <= MAX_NAME:
            kind = (state >> lay.unicode_kind_bit) & 7
            if kind in (1, 2, 4):
                data = self.mem.read(address + lay.unicode_compact_size, length * kind)
                text = data.decode({1: "latin-1", 2: "utf-16-le", 4: "utf-32-le"}[kind])
        return text


def _unpack3(raw: bytes, at: int) -> tuple[int, int, int]:
    h, k, v = struct.unpack_from("<qQQ", raw, at)
    return h, k, v
