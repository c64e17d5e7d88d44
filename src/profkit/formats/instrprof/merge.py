"""Merging profiles: an accumulator with ``llvm-profdata merge`` semantics (spec §7.2).

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
from collections.abc import Callable, Iterable
from operator import add
from typing import NamedTuple

from profkit.errors import ProfkitError
from profkit.formats.instrprof.model import (
    FunctionRecord,
    Profile,
    ProfileKind,
    TemporalTrace,
    ValueKind,
    ValueSite,
)

U64_MAX = (1 << 64) - 1
#: ``getInstrMaxCountValue``: merged counters stop here ("counter overflow").
MAX_COUNT = U64_MAX - 2
MAX_VALUES_PER_SITE = 255
PSEUDO_COUNTS = (U64_MAX, U64_MAX - 1)  # PseudoHot, PseudoWarm first counters
TRACE_RESERVOIR_SIZE = 100
MAX_TRACE_LENGTH = 10000

#: ``instrprof_error`` messages LLVM prints for per-record merge problems.
COUNT_MISMATCH = "function basic block count change detected (counter mismatch)"
COUNTER_OVERFLOW = "counter overflow"
BITMAP_MISMATCH = "function bitmap size change detected (bitmap size mismatch)"
VALUE_SITE_MISMATCH = "function value site count change detected (counter mismatch)"

Warn = Callable[[str], None]


class KindMismatchError(ProfkitError):
    """Profiles of incompatible kinds (front end vs IR, entry-only vs block counts)."""


def _no_warn(message: str) -> None:
    pass


def is_front_end(kind: ProfileKind) -> bool:
    """Our classification: anything without the IR bit is a front-end (clang) profile."""
    return not kind & ProfileKind.IR


def describe_kind(kind: ProfileKind) -> str:
    """A short human name for error messages."""
    if not is_front_end(kind):
        return "an IR-level (-fprofile-generate)"
    return "a front-end (-fprofile-instr-generate)"


class _RecordWarn:
    """Reports at most one problem per record, like LLVM's per-record ``Reported`` flag."""

    __slots__ = ("fired", "name", "warn")

    def __init__(self, warn: Warn, name: str) -> None:
        self.warn = warn
        self.name = name
        self.fired = False

    def __call__(self, message: str) -> None:
        if not self.fired:
            self.fired = True
            self.warn(f"{self.name}: {message}")


# ---------------------------------------------------------------------------------------
# value sites


def sort_site(site: ValueSite) -> ValueSite:
    """``sortByCount``: stable, count descending, cut to 255 values."""
    if len(site) > 1:
        site = sorted(site, key=lambda vc: -vc[1])
    return site[:MAX_VALUES_PER_SITE]


def merge_site(dst: ValueSite, src: ValueSite, weight: int, warn: Warn) -> ValueSite:
    """``InstrProfValueSiteRecord::merge`` then ``sortByCount``.

    As in LLVM, a value new to ``dst`` is inserted with its *unweighted* count; only
    counts of values present on both sides are multiplied by ``weight``.
    """
    a = sorted(dst, key=lambda vc: vc[0])
    b = sorted(src, key=lambda vc: vc[0])
    out: ValueSite = []
    i, n = 0, len(a)
    for value, count in b:
        while i < n and a[i][0] < value:
            out.append(a[i])
            i += 1
        if i < n and a[i][0] == value:
            total = count * weight + a[i][1]
            if total > U64_MAX:
                total = U64_MAX
                warn(COUNTER_OVERFLOW)
            out.append((value, total))
            i += 1
        else:
            out.append((value, count))
    out.extend(a[i:])
    return sort_site(out)


def _scale_sites(
    sites: dict[ValueKind, list[ValueSite]], weight: int, warn: Warn
) -> dict[ValueKind, list[ValueSite]]:
    out: dict[ValueKind, list[ValueSite]] = {}
    for kind, site_list in sites.items():
        new_list = []
        for site in site_list:
            row = []
            for value, count in site:
                scaled = count * weight
                if scaled > U64_MAX:
                    scaled = U64_MAX
                    warn(COUNTER_OVERFLOW)
                row.append((value, scaled))
            new_list.append(row)
        out[kind] = new_list
    return out


# ---------------------------------------------------------------------------------------
# records


def new_record(
    record: FunctionRecord, weight: int, warn: _RecordWarn, take: bool
) -> FunctionRecord:
    """A record seen for the first time: stored, scaled when ``weight > 1``, sites sorted."""
    counts = record.counts
    sites = record.value_sites
    if weight > 1:
        scaled = [c * weight for c in counts]
        if max(scaled) > MAX_COUNT:
            warn(COUNTER_OVERFLOW)
            scaled = [min(c, MAX_COUNT) for c in scaled]
        counts = scaled
    elif not take:
        counts = list(counts)
    if sites:
        sites = scale_and_sort_sites(sites, weight, warn)
    return FunctionRecord(record.name, record.hash, counts, bytes(record.bitmap), sites)


def merge_into(dst: FunctionRecord, src: FunctionRecord, weight: int, warn: _RecordWarn) -> None:
    """``InstrProfRecord::merge`` (in place) followed by ``sortValueData``."""
    dc, sc = dst.counts, src.counts
    if len(dc) != len(sc):
        warn(COUNT_MISMATCH)
        return
    if dc[0] in PSEUDO_COUNTS or sc[0] in PSEUDO_COUNTS:
        if dc[0] not in PSEUDO_COUNTS or sc[0] not in PSEUDO_COUNTS:
            warn(COUNT_MISMATCH)
            return
        pseudo = U64_MAX if U64_MAX in (dc[0], sc[0]) else U64_MAX - 1
        dst.counts = [pseudo, *dc[1:]]
        return
    merged = (
        list(map(add, dc, sc))
        if weight == 1
        else [d + s * weight for d, s in zip(dc, sc, strict=True)]
    )
    if max(merged) > MAX_COUNT:
        warn(COUNTER_OVERFLOW)
        merged = [min(c, MAX_COUNT) for c in merged]
    dst.counts = merged
    if len(dst.bitmap) != len(src.bitmap):
        warn(BITMAP_MISMATCH)
        return
    if src.bitmap:
        n = len(src.bitmap)
        ored = int.from_bytes(dst.bitmap, "little") | int.from_bytes(src.bitmap, "little")
        dst.bitmap = ored.to_bytes(n, "little")
    if dst.value_sites or src.value_sites:
        merge_value_sites(dst.value_sites, src.value_sites, weight, warn)


def merge_value_sites(
    dst: dict[ValueKind, list[ValueSite]],
    src: dict[ValueKind, list[ValueSite]],
    weight: int,
    warn: Warn,
) -> None:
    """``mergeValueProfData`` for every kind, in place: site counts must agree per kind."""
    for kind in ValueKind:
        mine = dst.get(kind, [])
        theirs = src.get(kind, [])
        if len(mine) != len(theirs):
            warn(VALUE_SITE_MISMATCH)
            continue
        if mine:
            dst[kind] = [merge_site(a, b, weight, warn) for a, b in zip(mine, theirs, strict=True)]


def scale_and_sort_sites(
    sites: dict[ValueKind, list[ValueSite]], weight: int, warn: Warn
) -> dict[ValueKind, list[ValueSite]]:
    """The value sites of a record seen for the first time: scaled, sorted, cut to 255."""
    if weight > 1:
        sites = _scale_sites(sites, weight, warn)
    return {k: [sort_site(s) for s in v] for k, v in sites.items() if v}


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

    def __init__(self) -> None:
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
        rwarn = _RecordWarn(warn or _no_warn, record.name)
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
            (warn or _no_warn)(f"{source or 'input'}: MemProf data is not carried over")
            kind &= ~ProfileKind.MEMPROF
        self.merge_kind(kind & ~ProfileKind.DEBUG_CORRELATE, source)
        functions = self.functions
        base_warn = warn or _no_warn
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
                        record, weight, _RecordWarn(base_warn, record.name), take
                    )
            else:
                merge_into(dst, record, weight, _RecordWarn(base_warn, record.name))
        self.binary_ids.extend(profile.binary_ids)
        if profile.kind & ProfileKind.TEMPORAL:
            traces = profile.temporal_traces
            if profile.format == "raw":  # LLVM weights only raw inputs' traces
                traces = [TemporalTrace(weight, t.function_refs) for t in traces]
            self.add_traces(traces, profile.temporal_trace_stream_size)

    def add_traces(self, traces: Iterable[TemporalTrace], stream_size: int) -> None:
        """``addTemporalProfileTraces``: append, or reservoir-sample once past 100 traces."""
        src = [
            TemporalTrace(t.weight, t.function_refs[:MAX_TRACE_LENGTH])
            for t in traces
            if t.function_refs
        ]
        del self.traces[TRACE_RESERVOIR_SIZE:]
        dest_sampled = self.trace_stream_size > TRACE_RESERVOIR_SIZE
        src_sampled = stream_size > TRACE_RESERVOIR_SIZE
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
        keep_src = min(len(src), round(TRACE_RESERVOIR_SIZE * stream_size / total))
        self._rng.shuffle(self.traces)
        self._rng.shuffle(src)
        self.traces = self.traces[: TRACE_RESERVOIR_SIZE - keep_src] + src[:keep_src]
        self.trace_stream_size = total

    def _add_trace(self, trace: TemporalTrace) -> None:
        if self.trace_stream_size < TRACE_RESERVOIR_SIZE:
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
