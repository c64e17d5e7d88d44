"""The merge accumulator with ``llvm-profdata merge`` semantics (spec §7.2).

:class:`ProfileMerger` plays the part of LLVM's ``InstrProfWriter``: records are keyed
by (name, FuncHash); a new key is stored (scaled by the input's weight), a known key
is merged — counters added with saturation at ``2^64 − 3``, MC/DC bitmap bytes OR-ed,
value sites merged by value then sorted by count and cut to 255 values. Problems with
one record (different counter counts, overflow) go to a ``warn`` callback, one message
per record, as LLVM does; incompatible profile kinds raise.

One deliberate difference: LLVM only notices a front-end/IR mix when a *text* input
says ``:fe``, because binary front-end profiles carry no flag (spec §7.3). We classify
every input — any profile without the IR bit in its version word (or text without
``:ir``/``:csir``) *is* a front-end profile, since clang's IR instrumentation always
sets that bit — and refuse the mix whatever the formats.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from typing import NamedTuple

from profkit.errors import ProfkitError
from profkit.formats.instrprof.hashtable import dense_map_order, string_map_order
from profkit.formats.instrprof.merge.records import (
    RecordWarn,
    Warn,
    merge_into,
    new_record,
    no_warn,
)
from profkit.formats.instrprof.model import FunctionRecord, Profile, ProfileKind, TemporalTrace

TRACE_RESERVOIR_SIZE = 100  # --temporal-profile-trace-reservoir-size default
MAX_TRACE_LENGTH = 10000  # --temporal-profile-max-trace-length default


class KindMismatchError(ProfkitError):
    """Profiles of incompatible kinds (front end vs IR, entry-only vs block counts)."""


def is_front_end(kind: ProfileKind) -> bool:
    """Our classification: anything without the IR bit is a front-end (clang) profile."""
    return not kind & ProfileKind.IR


def describe_kind(kind: ProfileKind) -> str:
    """A short human name for error messages."""
    if not is_front_end(kind):
        return "an IR-level (-fprofile-generate)"
    return "a front-end (-fprofile-instr-generate)"


# ---------------------------------------------------------------------------------------
# the accumulator


class MergeState(NamedTuple):
    """What a worker process sends back: everything needed to continue merging."""

    kind: ProfileKind | None
    kind_source: str | None
    records: list[FunctionRecord]
    binary_ids: list[bytes]
    traces: list[TemporalTrace]
    trace_stream_size: int


class ProfileMerger:
    """Accumulates profiles with ``llvm-profdata merge`` semantics; see the module docstring."""

    def __init__(
        self,
        *,
        trace_reservoir_size: int = TRACE_RESERVOIR_SIZE,
        max_trace_length: int = MAX_TRACE_LENGTH,
    ) -> None:
        self.reservoir = trace_reservoir_size
        self.max_trace_length = max_trace_length
        self.kind: ProfileKind | None = None
        self.kind_source: str | None = None
        self.functions: dict[str, dict[int, FunctionRecord]] = {}
        self.binary_ids: list[bytes] = []
        self.traces: list[TemporalTrace] = []
        self.trace_stream_size = 0
        self._rng = random.Random()

    # -- kinds -------------------------------------------------------------------------
    def merge_kind(self, kind: ProfileKind, source: str | None = None) -> None:
        """Fold one input's kind in, refusing front-end/IR and entry-only/block mixes."""
        if is_front_end(kind):
            kind |= ProfileKind.FRONTEND
        if self.kind is None:
            self.kind, self.kind_source = kind, source
            return
        here = f" ({self.kind_source})" if self.kind_source else ""
        there = f" ({source})" if source else ""
        if is_front_end(self.kind) != is_front_end(kind):
            raise KindMismatchError(
                f"cannot merge {describe_kind(kind)} profile{there} with "
                f"{describe_kind(self.kind)} profile{here}"
            )
        entry_only, entry_first = ProfileKind.FUNCTION_ENTRY_ONLY, ProfileKind.ENTRY_FIRST
        if (self.kind & entry_only and kind & entry_first) or (
            self.kind & entry_first and kind & entry_only
        ):
            raise KindMismatchError(
                f"cannot merge function-entry-only and block-count profiles{there}{here}"
            )
        self.kind |= kind

    # -- records -----------------------------------------------------------------------
    def add_record(
        self, record: FunctionRecord, weight: int = 1, warn: Warn | None = None, take: bool = False
    ) -> None:
        """``InstrProfWriter::addRecord``: store or merge one record."""
        by_hash = self.functions.get(record.name)
        if by_hash is None:
            by_hash = self.functions[record.name] = {}
        dst = by_hash.get(record.hash)
        rwarn = RecordWarn(warn or no_warn, record.name)
        if dst is None:
            by_hash[record.hash] = new_record(record, weight, rwarn, take)
        else:
            merge_into(dst, record, weight, rwarn)

    def add(
        self,
        profile: Profile,
        weight: int = 1,
        warn: Warn | None = None,
        *,
        source: str | None = None,
        take: bool = False,
    ) -> None:
        """Merge a whole profile in with ``weight`` (≥ 1).

        ``take=True`` lets the merger keep the profile's record objects (faster; the
        caller must not use ``profile`` afterwards).
        """
        if weight < 1:
            raise ProfkitError(f"weight must be at least 1, not {weight}")
        kind = profile.kind
        if kind & ProfileKind.MEMPROF:
            # We read past MemProf sections but do not carry them (see docs).
            (warn or no_warn)(f"{source or 'input'}: MemProf data is not carried over")
            kind &= ~ProfileKind.MEMPROF
        self.merge_kind(kind & ~ProfileKind.DEBUG_CORRELATE, source)
        functions = self.functions
        base_warn = warn or no_warn
        for record in profile.records:
            by_hash = functions.get(record.name)
            if by_hash is None:
                by_hash = functions[record.name] = {}
            dst = by_hash.get(record.hash)
            if dst is None:
                if weight == 1 and take and not record.value_sites:
                    by_hash[record.hash] = record
                else:
                    by_hash[record.hash] = new_record(
                        record, weight, RecordWarn(base_warn, record.name), take
                    )
            else:
                merge_into(dst, record, weight, RecordWarn(base_warn, record.name))
        self.binary_ids.extend(profile.binary_ids)
        if profile.kind & ProfileKind.TEMPORAL:
            traces = profile.temporal_traces
            if profile.format == "raw":  # LLVM weights only raw inputs' traces
                traces = [TemporalTrace(weight, t.function_refs) for t in traces]
            self.add_traces(traces, profile.temporal_trace_stream_size)

    def add_traces(self, traces: Iterable[TemporalTrace], stream_size: int) -> None:
        """``addTemporalProfileTraces``: append, or reservoir-sample once past 100 traces."""
        src = [
            TemporalTrace(t.weight, t.function_refs[: self.max_trace_length])
            for t in traces
            if t.function_refs
        ]
        del self.traces[self.reservoir :]
        dest_sampled = self.trace_stream_size > self.reservoir
        src_sampled = stream_size > self.reservoir
        if not dest_sampled and src_sampled:
            self.traces, src = src, self.traces
            self.trace_stream_size, stream_size = stream_size, self.trace_stream_size
            dest_sampled, src_sampled = src_sampled, dest_sampled
        if not src_sampled:
            for trace in src:
                self._add_trace(trace)
            return
        # Both sampled: keep a share proportional to each stream's size.
        total = self.trace_stream_size + stream_size
        keep_src = min(len(src), round(self.reservoir * stream_size / total))
        self._rng.shuffle(self.traces)
        self._rng.shuffle(src)
        self.traces = self.traces[: self.reservoir - keep_src] + src[:keep_src]
        self.trace_stream_size = total

    def _add_trace(self, trace: TemporalTrace) -> None:
        if self.trace_stream_size < self.reservoir:
            self.traces.append(trace)
        else:
            index = self._rng.randint(0, self.trace_stream_size)
            if index < len(self.traces):
                self.traces[index] = trace
        self.trace_stream_size += 1

    # -- combining accumulators (merge -j) ---------------------------------------------
    def state(self) -> MergeState:
        """A picklable snapshot for sending from a worker process."""
        records = [r for by_hash in self.functions.values() for r in by_hash.values()]
        return MergeState(
            self.kind,
            self.kind_source,
            records,
            self.binary_ids,
            self.traces,
            self.trace_stream_size,
        )

    def add_state(self, state: MergeState, warn: Warn | None = None) -> None:
        """``mergeRecordsFromWriter``: fold another accumulator's result in (weight 1)."""
        if state.kind is not None:
            self.merge_kind(state.kind, state.kind_source)
        for record in state.records:
            self.add_record(record, 1, warn, take=True)
        self.binary_ids.extend(state.binary_ids)
        if state.traces or state.trace_stream_size:
            self.add_traces(state.traces, state.trace_stream_size)

    def add_writer(self, other: ProfileMerger, llvm_version: int, warn: Warn | None = None) -> None:
        """``mergeRecordsFromWriter`` with LLVM's iteration orders (``merge -j``).

        ``other``'s names are visited in its ``StringMap`` order (only LLVM ≤ 16's djb
        hash is reproduced; later releases sort names before writing, so their order
        cannot show) and each name's records in ``SmallDenseMap`` order.
        """
        if other.kind is not None and llvm_version >= 16:
            # (LLVM 14 does not merge the kinds of its writers: only the first counts.)
            self.merge_kind(other.kind, other.kind_source)
        names = list(other.functions)
        if llvm_version < 17:
            order = string_map_order([n.encode("utf-8", "surrogateescape") for n in names])
            names = [names[i] for i in order]
        for name in names:
            by_hash = other.functions[name]
            records = list(by_hash.values())
            if len(records) > 1:
                hashes = [r.hash for r in records]
                records = [records[i] for i in dense_map_order(hashes, llvm_version >= 19)]
            for record in records:
                self.add_record(record, 1, warn, take=True)
        self.binary_ids.extend(other.binary_ids)
        if other.traces or other.trace_stream_size:
            self.add_traces(other.traces, other.trace_stream_size)

    # -- result ------------------------------------------------------------------------
    def result(self, *, sparse: bool = False) -> Profile:
        """The merged profile; ``sparse`` drops names whose records are all zero."""
        records: list[FunctionRecord] = []
        for by_hash in self.functions.values():
            group = list(by_hash.values())
            if sparse and not any(any(r.counts) or any(r.bitmap) for r in group):
                continue
            records.extend(group)
        kind = self.kind if self.kind is not None else ProfileKind.NONE
        return Profile(
            kind=kind,
            records=records,
            format="merged",
            binary_ids=sorted(set(self.binary_ids)),
            temporal_traces=list(self.traces),
            temporal_trace_stream_size=self.trace_stream_size,
        )


def drop_all_zero(profile: Profile) -> None:
    """``--sparse``: drop every name whose records all have zero counters and bitmaps."""
    live = {r.name for r in profile.records if any(r.counts) or any(r.bitmap)}
    profile.records = [r for r in profile.records if r.name in live]


def merge_profiles(
    profiles: Iterable[Profile | tuple[Profile, int]],
    *,
    warn: Warn | None = None,
    sparse: bool = False,
) -> Profile:
    """Merge profiles (or ``(profile, weight)`` pairs) in order; see :class:`ProfileMerger`."""
    merger = ProfileMerger()
    for item in profiles:
        profile, weight = item if isinstance(item, tuple) else (item, 1)
        merger.add(profile, weight, warn)
    return merger.result(sparse=sparse)
