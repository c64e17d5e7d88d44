"""On-disk layouts of raw profiles as data: one table per version, compiled once per variant.

Headers are flat lists of u64 fields in spec order (spec §4.2); per-function data
records (§4.4) and vtable records (§4.8) use C natural alignment with ``P`` for a
pointer-sized integer, so one table serves 32- and 64-bit profiles of both byte
orders. Offsets, padding and sizes are *computed* from the tables, never written as
literals, which is exactly where third-party parsers go wrong (spec §8.5).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from functools import lru_cache

Fields = tuple[str, ...]


def insert(base: Fields, *, after: str, add: Fields) -> Fields:
    """A copy of ``base`` with ``add`` inserted right after the field named ``after``."""
    names = [f.split(":")[0] for f in base]
    i = names.index(after) + 1
    return base[:i] + add + base[i:]


# --- raw headers (spec §4.2) ------------------------------------------------------------
# v5 (LLVM 10-12). v6 never shipped (binary IDs during LLVM 13 development).
RAW_V5: Fields = (
    "magic:Q",
    "version:Q",
    "num_data:Q",
    "padding_before_counters:Q",
    "num_counters:Q",
    "padding_after_counters:Q",
    "names_size:Q",
    "counters_delta:Q",
    "names_delta:Q",
    "value_kind_last:Q",
)
# v7 (LLVM 13) / v8 (LLVM 14-17): binary IDs right after the header.
RAW_V8 = insert(RAW_V5, after="version", add=("binary_ids_size:Q",))
# v9 (LLVM 18): MC/DC bitmap section.
RAW_V9 = insert(
    RAW_V8, after="padding_after_counters", add=("num_bitmap_bytes:Q", "padding_after_bitmap:Q")
)
RAW_V9 = insert(RAW_V9, after="counters_delta", add=("bitmap_delta:Q",))
# v10 (LLVM 19-22): vtable profiling.
RAW_V10 = insert(RAW_V9, after="names_delta", add=("num_vtables:Q", "vnames_size:Q"))
# v11 (LLVM 23, experimental, spec §4.9 [unverified]): uniform counters for GPU offload.
RAW_V11 = insert(
    RAW_V10,
    after="padding_after_bitmap",
    add=("num_uniform_counters:Q", "padding_after_uniform:Q", "uniform_counters_delta:Q"),
)

RAW_HEADER: dict[int, Fields] = {
    5: RAW_V5,
    7: RAW_V8,
    8: RAW_V8,
    9: RAW_V9,
    10: RAW_V10,
    11: RAW_V11,
}
#: Raw versions whose layout we know, newest last (used in "unsupported version" messages).
RAW_VERSIONS = tuple(sorted(RAW_HEADER))
#: Versions from 8 on store CounterPtr/BitmapPtr relative to the record (spec §4.5).
RELATIVE_POINTERS_FROM = 8

# --- per-function data records (spec §4.4) ------------------------------------------------
RECORD_V5: Fields = (
    "name_ref:Q",
    "func_hash:Q",
    "counter_ptr:P",
    "function_ptr:P",
    "values:P",
    "num_counters:I",
    "num_value_sites:2H",
)
RECORD_V9: Fields = (
    "name_ref:Q",
    "func_hash:Q",
    "counter_ptr:P",
    "bitmap_ptr:P",
    "function_ptr:P",
    "values:P",
    "num_counters:I",
    "num_value_sites:2H",
    "num_bitmap_bytes:I",
)
RECORD_V10 = tuple(f.replace(":2H", ":3H") for f in RECORD_V9)
RECORD_V11 = insert(
    insert(RECORD_V10, after="counter_ptr", add=("uniform_counter_ptr:P",)),
    after="num_value_sites",
    add=("offload_device_wave_size:H",),
)
RAW_RECORD: dict[int, Fields] = {
    5: RECORD_V5,
    7: RECORD_V5,
    8: RECORD_V5,
    9: RECORD_V9,
    10: RECORD_V10,
    11: RECORD_V11,
}

# --- vtable records (spec §4.8, v10+) --------------------------------------------------
VTABLE_RECORD: Fields = ("name_hash:Q", "vtable_ptr:P", "size:I")

_ITEM_SIZE = {"Q": 8, "I": 4, "H": 2, "B": 1}


@dataclass(frozen=True, slots=True)
class Layout:
    """A compiled layout: the struct, and where each named field lands in its tuple."""

    struct: struct.Struct
    #: field name → (first index in the unpacked tuple, number of values)
    index: dict[str, tuple[int, int]]
    #: field name → byte offset of its first value in the record (for array views
    #: over many records at once, as the raw merge's fast path takes them)
    offsets: dict[str, int]

    @property
    def size(self) -> int:
        return self.struct.size

    def has(self, name: str) -> bool:
        return name in self.index

    def pos(self, name: str) -> int:
        """Tuple index of a scalar field."""
        return self.index[name][0]


@lru_cache(maxsize=64)
def compile_layout(fields: Fields, order: str, pointer_size: int) -> Layout:
    """Compile ``fields`` for byte ``order`` (``<``/``>``) and pointer width (4 or 8).

    Each field is placed at its natural alignment and the whole record is padded to a
    multiple of 8 (records are ``alignas(8)`` in LLVM), mirroring the C compiler.
    """
    fmt = [order]
    offset = 0
    index: dict[str, tuple[int, int]] = {}
    offsets: dict[str, int] = {}
    slot = 0
    for spec in fields:
        # "name:CODE" or "name:<count>CODE"; CODE is one of Q I H B P.
        name, _, kind = spec.partition(":")
        code = kind[-1:]
        if code not in "QIHBP" or not code or not (kind[:-1] or "1").isdigit():
            raise ValueError(f"bad layout field {spec!r}")  # pragma: no cover - table bug
        count = int(kind[:-1] or 1)
        if code == "P":
            code = "Q" if pointer_size == 8 else "I"
        size = _ITEM_SIZE[code]
        pad = (-offset) % size
        if pad:
            fmt.append(f"{pad}x")
            offset += pad
        fmt.append(f"{count}{code}" if count > 1 else code)
        offsets[name] = offset
        offset += size * count
        index[name] = (slot, count)
        slot += count
    tail = (-offset) % 8
    if tail:
        fmt.append(f"{tail}x")
    return Layout(struct.Struct("".join(fmt)), index, offsets)
