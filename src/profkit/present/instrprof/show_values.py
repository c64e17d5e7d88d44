"""Value profiles in ``llvm-profdata show`` text: per-record sites and per-kind statistics.

Why a module of its own: ``--ic-targets``, ``--memop-sizes`` and ``--show-vtables`` add a
second kind of output (``traverseAllValueSites``: one line per profiled value, then a
histogram per value kind after the records) with its own state, apart from the counters
:mod:`.llvm_show` prints and the summary :mod:`.show_footer` prints.
"""

from __future__ import annotations

from collections.abc import Callable

from profkit.formats.instrprof.model import FunctionRecord, ValueKind
from profkit.present.instrprof.show_options import ShowOptions


class SiteStats:
    """Per value kind: sites, sites with values, values, and a values-per-site histogram.

    A plain class: a dataclass costs ~0.3 ms to build at import, paid by every ``show``."""

    __slots__ = ("histogram", "sites", "values", "with_values")

    def __init__(self) -> None:
        self.sites = 0
        self.with_values = 0
        self.values = 0
        self.histogram: list[int] = []


def c_percent(count: int, total: int) -> str:
    """``format("%.2f%%", count * 100.0 / total)``, as LLVM prints shares."""
    return f"{count * 100.0 / total:.2f}%"


def _sites(
    out: list[str],
    rec: FunctionRecord,
    kind: ValueKind,
    stats: SiteStats,
    lookup: Callable[[int], str] | None,
) -> None:
    """``traverseAllValueSites``: one line per value, and the per-kind statistics."""
    sites = rec.value_sites.get(kind, ())
    stats.sites += len(sites)
    for i, site in enumerate(sites):
        nv = len(site)
        if nv == 0:
            continue
        stats.values += nv
        stats.with_values += 1
        if nv > len(stats.histogram):
            stats.histogram.extend([0] * (nv - len(stats.histogram)))
        stats.histogram[nv - 1] += 1
        total = sum(c for _, c in site) & ((1 << 64) - 1) or 1
        for value, count in site:
            shown = f"{value:4d}" if lookup is None else lookup(value)
            signed = count - (1 << 64) if count >= 1 << 63 else count
            pct = c_percent(count, total)
            out.append(f"\t[ {i:2d}, {shown}, {signed:10d} ] ({pct})")


def site_stats(out: list[str], title: str, stats: SiteStats) -> None:
    """The statistics block of one value kind, printed after the records."""
    out.append(title)
    out.append(f"  Total number of sites: {stats.sites}")
    out.append(f"  Total number of sites with values: {stats.with_values}")
    out.append(f"  Total number of profiled values: {stats.values}")
    out.append("  Value sites histogram:\n\tNumTargets, SiteCount")
    for i, n in enumerate(stats.histogram):
        if n > 0:
            out.append(f"\t{i + 1}, {n}")


def value_details(
    out: list[str],
    rec: FunctionRecord,
    opts: ShowOptions,
    stats: list[SiteStats],
    lookup: Callable[[int], str],
    counts: list[int],
    first: int,
) -> None:
    """The lines of one record after its header when a value kind was asked for."""
    if opts.ic_targets:
        n_ic = rec.num_value_sites(ValueKind.INDIRECT_CALL_TARGET)
        out.append(f"    Indirect Call Site Count: {n_ic}")
    if opts.show_vtables:
        n_vt = rec.num_value_sites(ValueKind.VTABLE_TARGET)
        out.append(f"    Number of instrumented vtables: {n_vt}")
    n_mem = rec.num_value_sites(ValueKind.MEMOP_SIZE)
    if opts.memop_sizes and n_mem:
        out.append(f"    Number of Memory Intrinsics Calls: {n_mem}")
    if opts.counts:
        out.append("    Block counts: [" + ", ".join(map(str, counts[first:])) + "]")
    if opts.ic_targets:
        out.append("    Indirect Target Results:")
        _sites(out, rec, ValueKind.INDIRECT_CALL_TARGET, stats[0], lookup)
    if opts.show_vtables:
        out.append("    VTable Results:")
        _sites(out, rec, ValueKind.VTABLE_TARGET, stats[2], lookup)
    if opts.memop_sizes and n_mem:
        out.append("    Memory Intrinsic Size Results:")
        _sites(out, rec, ValueKind.MEMOP_SIZE, stats[1], None)
