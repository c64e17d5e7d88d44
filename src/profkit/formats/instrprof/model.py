"""The one in-memory model of an LLVM instrumentation profile, shared by every version.

Raw, indexed and text readers all produce a :class:`Profile`; the writers and the
``show`` / ``merge`` / ``overlap`` operations consume one. Version differences stay in
the readers' layout tables; nothing here depends on a file version.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from dataclasses import dataclass, field

#: Bit 60 of FuncHash marks a context-sensitive (CS) record (``CS_FLAG_IN_FUNC_HASH``).
CS_FLAG_IN_FUNC_HASH = 1 << 60


class ProfileKind(enum.IntFlag):
    """The variant flags of the version word (high 32 bits), plus FE which has no bit.

    Values equal the on-disk masks, so ``ProfileKind(version >> 32 << 32)`` decodes a
    header; :attr:`FRONTEND` lives outside the on-disk bits because binary front-end
    profiles carry no flag at all (spec §3; only text ``:fe`` states it).
    """

    NONE = 0
    FRONTEND = 1 << 0  # text ":fe"; not on disk
    INSTR_LOOP_ENTRIES = 1 << 55
    IR = 1 << 56
    CS_IR = 1 << 57
    ENTRY_FIRST = 1 << 58
    DEBUG_CORRELATE = 1 << 59
    SINGLE_BYTE_COVERAGE = 1 << 60
    FUNCTION_ENTRY_ONLY = 1 << 61
    MEMPROF = 1 << 62
    TEMPORAL = 1 << 63

    @classmethod
    def from_version_word(cls, word: int) -> ProfileKind:
        """The flags of a 64-bit version word (unknown high bits are dropped)."""
        known = 0
        for member in cls:
            if member.value and member is not cls.FRONTEND:
                known |= member.value
        return cls(word & known & ~0xFFFFFFFF)

    def version_bits(self) -> int:
        """The on-disk part (everything but FRONTEND)."""
        return int(self) & ~int(ProfileKind.FRONTEND) & ~0xFFFFFFFF


class ValueKind(enum.IntEnum):
    """Value-profile kinds (``IPVK_*``)."""

    INDIRECT_CALL_TARGET = 0
    MEMOP_SIZE = 1
    VTABLE_TARGET = 2


#: One value-profile site: (value, count) pairs. For indirect calls and vtables ``value``
#: is the MD5 NameRef of the target (0 = unknown, "** External Symbol **").
ValueSite = list[tuple[int, int]]


@dataclass(slots=True)
class FunctionRecord:
    """One (name, hash) record: counters, MC/DC bitmap bytes, value-profile sites."""

    name: str
    hash: int
    counts: list[int]
    bitmap: bytes = b""
    #: kind → sites, each site a list of (value, count); absent kind = no sites.
    value_sites: dict[ValueKind, list[ValueSite]] = field(default_factory=dict)

    @property
    def is_cs(self) -> bool:
        """Context-sensitive record (FuncHash bit 60)."""
        return bool(self.hash & CS_FLAG_IN_FUNC_HASH)

    def num_value_sites(self, kind: ValueKind) -> int:
        return len(self.value_sites.get(kind, ()))


@dataclass(frozen=True, slots=True)
class SummaryEntry:
    """One cutoff row of a profile summary (cutoff in parts per million)."""

    cutoff: int
    min_count: int
    num_counts: int


@dataclass(slots=True)
class Summary:
    """A profile summary as the indexed format stores it (spec §5.2)."""

    total_num_functions: int = 0
    total_num_blocks: int = 0
    max_function_count: int = 0
    max_block_count: int = 0
    max_internal_block_count: int = 0
    total_block_count: int = 0
    entries: list[SummaryEntry] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class TemporalTrace:
    """A temporal profile trace: a weight and the functions in first-call order (MD5 NameRefs)."""

    weight: int
    function_refs: tuple[int, ...]


@dataclass(slots=True)
class Profile:
    """A whole profile: kind, records, and whatever else the source format carried.

    ``records`` keeps reader order (raw: record order; indexed: hash-table order),
    because ``llvm-profdata show`` prints in that order.
    """

    kind: ProfileKind
    records: list[FunctionRecord] = field(default_factory=list)
    #: The file version the profile came from (low 32 bits of the version word), if any.
    version: int | None = None
    #: The whole 64-bit version word as stored (raw/indexed only).
    version_word: int | None = None
    format: str = "unknown"  # "raw" | "indexed" | "text"
    binary_ids: list[bytes] = field(default_factory=list)
    summary: Summary | None = None
    cs_summary: Summary | None = None
    temporal_traces: list[TemporalTrace] = field(default_factory=list)
    temporal_trace_stream_size: int = 0
    #: MD5 NameRef → name, for resolving indirect-call/vtable targets to names.
    symtab: dict[int, str] = field(default_factory=dict)
    #: MD5 → vtable name (v10+ raw, v12+ indexed).
    vtable_names: dict[int, str] = field(default_factory=dict)
    #: Notes a reader wants the user to see (e.g. "MemProf section skipped").
    notes: list[str] = field(default_factory=list)

    def __iter__(self) -> Iterator[FunctionRecord]:
        return iter(self.records)

    def __len__(self) -> int:
        return len(self.records)

    def find(self, name: str) -> list[FunctionRecord]:
        """Every record named ``name`` (several when hashes differ, e.g. CS + plain)."""
        return [r for r in self.records if r.name == name]

    @property
    def is_ir(self) -> bool:
        return bool(self.kind & ProfileKind.IR)
