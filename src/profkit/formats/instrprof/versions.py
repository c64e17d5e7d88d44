"""Indexed profile versions in one table: the header per version, what each version
stores, and which LLVM release writes which version (spec §2.2, §5.1, §5.4).

Why one module: LLVM keeps one ``IndexedInstrProf::Header`` and ``ProfVersion`` for its
reader and its writer. profkit's indexed reader (:mod:`.indexed`), writer
(:mod:`.indexed_writer`), the choice of the version to write (:mod:`.compat`) and
``profdata merge`` (which release's merge order to imitate) all read this table, so a new
version is one more row here, not four edits that can disagree (the merge once sent v8 to
LLVM 14, while ``compat`` knew LLVM 14 writes v7 and only LLVM 15 writes v8).
"""

from __future__ import annotations

from functools import lru_cache

# --- the header (spec §5.1) ---------------------------------------------------------------
#: Header fields, all u64, in file order, with the version each first appears in.
HEADER_FIELDS: tuple[tuple[str, int], ...] = (
    ("magic", 1),
    ("version", 1),
    ("unused", 1),  # MaxFunctionCount before v4; written 0
    ("hash_type", 1),
    ("hash_offset", 1),
    ("memprof_offset", 8),
    ("binary_id_offset", 9),
    ("temporal_traces_offset", 10),
    ("vtable_names_offset", 12),
)
_WORD = 8

# --- what a version stores: the first version with each feature (spec §5.1, §5.4) ---------
EXPLICIT_COUNTS_FROM = 2  # several records per key, explicit counter count
VALUE_DATA_FROM = 3  # value-profile block after the counters
SUMMARY_FROM = 4  # profile summary after the header
MEMPROF_FROM = 8  # MemProfOffset (the writer never fills it)
BINARY_IDS_FROM = 9  # binary-ID section
TEMPORAL_FROM = 10  # temporal-trace section
BITMAP_FROM = 11  # MC/DC bitmap bytes in every record
VTABLE_FROM = 12  # vtable-names section, vtable value profiles
LOOP_ENTRIES_FROM = 13  # loop-entry profiles (front-end hash V4)
PACKED_BITMAP_FROM = 14  # bitmap bytes packed (LLVM 23, spec's unverified notes)
#: Newest indexed version the reader takes.
NEWEST_READ = 14

# --- who writes which version (spec §2.2) -------------------------------------------------
#: LLVM release → (raw version its runtime writes, indexed version its ``llvm-profdata
#: merge`` writes, which is also the newest it reads). 14 → indexed 7 and 16 → 9 are
#: checked against the installed llvm-profdata-14 and the committed fixtures; 15 → 8 from
#: LLVM 15's installed headers (the MemProf header field came after the 14 branch).
RELEASES: dict[int, tuple[int, int]] = {
    9: (5, 5), 10: (5, 5), 11: (5, 5), 12: (5, 7), 13: (7, 7), 14: (8, 7), 15: (8, 8),
    16: (8, 9), 17: (8, 10), 18: (9, 11), 19: (10, 12), 20: (10, 12), 21: (10, 12),
    22: (10, 13), 23: (11, 14),
}  # fmt: skip
#: LLVM release → the indexed version it writes and reads at most.
INDEXED_BY_RELEASE: dict[int, int] = {r: indexed for r, (_, indexed) in RELEASES.items()}
#: Raw version → (oldest, newest) LLVM release whose runtime writes it.
RAW_RELEASES: dict[int, tuple[int, int]] = {
    raw: (min(rs), max(rs))
    for raw in sorted({raw for raw, _ in RELEASES.values()})
    for rs in [[r for r, (w, _) in RELEASES.items() if w == raw]]
}

# --- what profkit writes ------------------------------------------------------------------
#: The indexed versions profkit's writer produces.
OLDEST_WRITTEN, NEWEST_WRITTEN = 7, 13
#: Releases whose ``llvm-profdata merge`` output profkit reproduces byte for byte (the
#: fixtures of ``tests/fixtures/instrprof``): ``--llvm-version`` takes these.
REPRODUCED_RELEASES = (14, 16, 19, 22)
#: The newest of them: the default wording, text dialect and merge order.
NEWEST_REPRODUCED = REPRODUCED_RELEASES[-1]
#: From this version on the writer orders names and records as LLVM 19+ does (names
#: sorted, SmallDenseMap's mixing hash); older versions as LLVM 14/16 (StringMap order).
LLVM19_ORDER_FROM = 12


def header_fields(version: int) -> tuple[str, ...]:
    """The u64 fields of an indexed ``version`` header, in file order."""
    return tuple(name for name, since in HEADER_FIELDS if version >= since)


@lru_cache(maxsize=32)
def header_offsets(version: int) -> dict[str, int]:
    """Byte offset of each header field of ``version`` (every field is one u64)."""
    return {name: _WORD * i for i, name in enumerate(header_fields(version))}


def header_size(version: int) -> int:
    """Bytes of an indexed ``version`` header: 40 up to v7, 48 (v8) … 72 (v12+)."""
    return _WORD * len(header_fields(version))


def written_by(version: int) -> list[int]:
    """The LLVM releases whose ``llvm-profdata merge`` writes indexed ``version``."""
    return [r for r, (_, indexed) in RELEASES.items() if indexed == version]


def merge_order_release(version: int | None) -> int:
    """The release whose ``merge -j`` iteration orders profkit imitates when it writes
    indexed ``version``: the newest release writing that version (7 → LLVM 14, 8 → 15,
    9 → 16, 10 → 17, 11 → 18, 12 → 21, 13 → 22); the newest reproduced release when no
    version is given, or one profkit does not write (the writer refuses it afterwards).
    """
    if version is None or not OLDEST_WRITTEN <= version <= NEWEST_WRITTEN:
        return NEWEST_REPRODUCED
    return max(written_by(version))
