"""Layout of LLVM's on-disk chained hash table, and the per-name record order (spec §5.3).

Nothing here reads the table; it only decides *where* each item goes, reproducing
``OnDiskChainedHashTableGenerator`` exactly (64 initial buckets, doubling at 3/4 load,
head insertion, a final resize to the next power of two above 4/3 of the entries) so
that our indexed files are byte-identical to ``llvm-profdata merge``'s. It also
reproduces the iteration order of the ``SmallDenseMap<uint64_t, InstrProfRecord>`` that
holds several records under one name, which decides their order inside an item.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")

_M32 = 0xFFFFFFFF
_M64 = (1 << 64) - 1


def table_layout(hashes: Sequence[int]) -> tuple[int, list[list[int]]]:
    """Bucket count and, per bucket, the item indexes in chain order (head first).

    ``hashes`` are the keys' 64-bit hashes in insertion order.
    """
    num_buckets = 64
    # A chain is kept tail-first (append = insert at head) so inserting is O(1).
    buckets: list[list[int]] = [[] for _ in range(num_buckets)]
    entries = 0
    for index, key_hash in enumerate(hashes):
        entries += 1
        if 4 * entries >= 3 * num_buckets:
            num_buckets *= 2
            buckets = _rehash(buckets, hashes, num_buckets)
        buckets[key_hash & (num_buckets - 1)].append(index)
    target = 1 if entries <= 2 else _next_power_of_two(entries * 4 // 3)
    if target != num_buckets:
        num_buckets = target
        buckets = _rehash(buckets, hashes, num_buckets)
    return num_buckets, [chain[::-1] for chain in buckets]


def _rehash(buckets: list[list[int]], hashes: Sequence[int], size: int) -> list[list[int]]:
    mask = size - 1
    new: list[list[int]] = [[] for _ in range(size)]
    for chain in buckets:
        for index in reversed(chain):  # walk each chain from its head
            new[hashes[index] & mask].append(index)
    return new


def _next_power_of_two(value: int) -> int:
    """LLVM ``NextPowerOf2``: the smallest power of two strictly greater than ``value``."""
    return 1 << value.bit_length()


# ---------------------------------------------------------------------------------------
# SmallDenseMap<uint64_t, ...> iteration order


def _hash_times_37(value: int) -> int:
    return (value * 37) & _M32


def _hash_mix(value: int) -> int:
    # LLVM 22 ``densemap::detail::mix`` (splitmix64 multiplier, one xor-shift), truncated.
    x = (value * 0xBF58476D1CE4E5B9) & _M64
    return (x ^ (x >> 31)) & _M32


def dense_map_order(keys: Sequence[int], mixed_hash: bool) -> list[int]:
    """Indexes of ``keys`` (distinct u64s, insertion order) in ``SmallDenseMap`` iteration order.

    ``mixed_hash`` selects LLVM 22's integer hash (``mix``) over the older ``key * 37``.
    The map starts with 4 inline buckets and grows to 64 when the third key arrives.
    """
    if len(keys) < 2:
        return list(range(len(keys)))
    hash_fn = _hash_mix if mixed_hash else _hash_times_37
    size = 4
    table: list[int | None] = [None] * size
    for index in range(len(keys)):
        if (index + 1) * 4 >= size * 3:
            new_size = max(64, _next_power_of_two(size * 2 - 1))
            old = [i for i in table if i is not None]
            size = new_size
            table = [None] * size
            for moved in old:
                _place(table, size, hash_fn(keys[moved]), moved)
        _place(table, size, hash_fn(keys[index]), index)
    return [i for i in table if i is not None]


def _place(table: list[int | None], size: int, key_hash: int, index: int) -> None:
    bucket = key_hash & (size - 1)
    probe = 1
    while table[bucket] is not None:
        bucket = (bucket + probe) & (size - 1)
        probe += 1
    table[bucket] = index


# ---------------------------------------------------------------------------------------
# StringMap iteration order (LLVM 14/16 insert names into the table in this order)


def djb_hash(key: bytes, seed: int = 0) -> int:
    """LLVM ``djbHash`` (``h = h * 33 + c``, 32-bit), the StringMap hash before LLVM 17."""
    h = seed
    for c in key:
        h = (h * 33 + c) & _M32
    return h


def _free_bucket(table: list[int | None], h: int, size: int) -> int:
    """The bucket StringMap's quadratic probing gives hash ``h`` in a table of ``size``."""
    bucket = h & (size - 1)
    probe = 1
    while table[bucket] is not None:
        bucket = (bucket + probe) & (size - 1)
        probe += 1
    return bucket


def string_map_order(keys: Sequence[bytes]) -> list[int]:
    """Indexes of distinct ``keys`` (insertion order) in LLVM ≤ 16 ``StringMap`` iteration order.

    LLVM 14/16 ``InstrProfWriter`` feed the on-disk table straight from this map, so
    their output depends on it; LLVM 19+ sort the names first.
    """
    size = 16
    table: list[int | None] = [None] * size
    full: list[int] = [0] * size
    items = 0
    for index, key in enumerate(keys):
        h = djb_hash(key)
        bucket = _free_bucket(table, h, size)
        table[bucket] = index
        full[bucket] = h
        items += 1
        if items * 4 > size * 3:
            new_size = size * 2
            new_table: list[int | None] = [None] * new_size
            new_full = [0] * new_size
            for slot in range(size):
                moved = table[slot]
                if moved is None:
                    continue
                fh = full[slot]
                nb = _free_bucket(new_table, fh, new_size)
                new_table[nb] = moved
                new_full[nb] = fh
            size, table, full = new_size, new_table, new_full
    return [i for i in table if i is not None]
