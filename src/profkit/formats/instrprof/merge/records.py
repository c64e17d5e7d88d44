"""Merging one record into another, exactly as LLVM's ``InstrProfRecord`` does (spec §7.2).

Shared by :class:`~profkit.formats.instrprof.merge.ProfileMerger` (record by record)
and :mod:`~profkit.formats.instrprof.merge.raw_arrays` (value sites of whole raw files), so both
paths saturate, clamp, sort and cut value sites the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import add

from profkit.formats.instrprof.model import FunctionRecord, ValueKind, ValueSite

U64_MAX = (1 << 64) - 1
#: ``getInstrMaxCountValue``: merged counters stop here ("counter overflow").
MAX_COUNT = U64_MAX - 2
MAX_VALUES_PER_SITE = 255
PSEUDO_COUNTS = (U64_MAX, U64_MAX - 1)  # PseudoHot, PseudoWarm first counters

#: ``instrprof_error`` messages LLVM prints for per-record merge problems.
COUNT_MISMATCH = "function basic block count change detected (counter mismatch)"
COUNTER_OVERFLOW = "counter overflow"
BITMAP_MISMATCH = "function bitmap size change detected (bitmap size mismatch)"
VALUE_SITE_MISMATCH = "function value site count change detected (counter mismatch)"

Warn = Callable[[str], None]


def no_warn(message: str) -> None:
    """The default ``warn`` callback: ignore."""
    pass


class RecordWarn:
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


def new_record(record: FunctionRecord, weight: int, warn: RecordWarn, take: bool) -> FunctionRecord:
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


def merge_into(dst: FunctionRecord, src: FunctionRecord, weight: int, warn: RecordWarn) -> None:
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
