"""The text of ``llvm-profdata show`` for instrumentation profiles (LLVM 22 wording, spec §7.1).

:func:`show_text` mirrors ``showInstrProfile`` line for line: the same record filter
(CS records only with ``showcs`` on IR profiles), the same summary recomputed from the
shown records, the same ``--topn`` order for equal counts and the same float formatting
of cutoff percentages. ``ShowOptions.llvm_version`` picks the wording of older releases
(verified against llvm-profdata 14, 16, 19 and 22). profkit's own machine-readable
variant is :func:`profkit.present.instrprof.json_show.show_json`.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence

from profkit.formats.instrprof.model import (
    CS_FLAG_IN_FUNC_HASH,
    FunctionRecord,
    Profile,
    ProfileKind,
    ValueKind,
)
from profkit.formats.instrprof.summary import DEFAULT_CUTOFFS, SCALE, SummaryBuilder
from profkit.present.instrprof.show_options import (
    NEW_WORDING_FROM,
    ShowOptions,
    symbol_lookup,
)
from profkit.present.instrprof.topn import StdHeapTopN, TopN

EXTERNAL_SYMBOL = "** External Symbol **"
#: ``show --detailed-summary`` of LLVM 14 used a shorter default cutoff list (16 has the full one).
OLD_CUTOFFS = (800000, 900000, 950000, 990000, 999000, 999900, 999990)
FULL_CUTOFFS_FROM = 16
#: From this release an indexed file without binary IDs still prints "Binary IDs: ".
INDEXED_EMPTY_IDS_HEADER_FROM = 19
_PSEUDO = {(1 << 64) - 1: "PseudoHot", (1 << 64) - 2: "PseudoWarm"}
_KIND_DESCR = ("IPVK_IndirectCallTarget", "IPVK_MemOPSize", "IPVK_VTableTarget")


class _SiteStats:
    """Per value kind: sites, sites with values, values, and a values-per-site histogram.

    A plain class: a dataclass costs ~0.3 ms to build at import, paid by every ``show``."""

    __slots__ = ("histogram", "sites", "values", "with_values")

    def __init__(self) -> None:
        self.sites = 0
        self.with_values = 0
        self.values = 0
        self.histogram: list[int] = []


def _f32(x: float) -> float:
    return float(struct.unpack("f", struct.pack("f", x))[0])


def cutoff_percent(cutoff: int) -> str:
    """``format("%0.6g", (float)Cutoff / Scale * 100)`` with C ``float`` rounding."""
    return format(_f32(_f32(_f32(float(cutoff)) / _f32(float(SCALE))) * _f32(100.0)), "0.6g")


def _is_shown_kind(rec: FunctionRecord, is_ir: bool, showcs: bool) -> bool:
    return not is_ir or rec.is_cs == showcs


def _c_percent(count: int, total: int) -> str:
    return f"{count * 100.0 / total:.2f}%"


def _sites(
    out: list[str],
    rec: FunctionRecord,
    kind: ValueKind,
    stats: _SiteStats,
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
            pct = _c_percent(count, total)
            out.append(f"\t[ {i:2d}, {shown}, {signed:10d} ] ({pct})")


def _site_stats(out: list[str], title: str, stats: _SiteStats) -> None:
    out.append(title)
    out.append(f"  Total number of sites: {stats.sites}")
    out.append(f"  Total number of sites with values: {stats.with_values}")
    out.append(f"  Total number of profiled values: {stats.values}")
    out.append("  Value sites histogram:\n\tNumTargets, SiteCount")
    for i, n in enumerate(stats.histogram):
        if n > 0:
            out.append(f"\t{i + 1}, {n}")


def record_text(rec: FunctionRecord, lookup: Callable[[int], str]) -> str:
    """One record in the text format (``InstrProfWriter::writeRecordInText``)."""
    lines = [rec.name, "# Func Hash:", str(rec.hash), "# Num Counters:", str(len(rec.counts))]
    lines.append("# Counter Values:")
    lines.extend(map(str, rec.counts))
    if rec.bitmap:
        lines.append(f"# Num Bitmap Bytes:\n${len(rec.bitmap)}\n# Bitmap Byte Values:")
        lines.extend(f"0x{b:x}" for b in rec.bitmap)
        lines.append("")
    kinds = [k for k in ValueKind if rec.value_sites.get(k)]
    if kinds:
        lines.append(f"# Num Value Kinds:\n{len(kinds)}")
        for k in kinds:
            sites = rec.value_sites[k]
            lines.append(
                f"# ValueKind = {_KIND_DESCR[k]}:\n{int(k)}\n# NumValueSites:\n{len(sites)}"
            )
            for site in sites:
                lines.append(str(len(site)))
                for v, c in site:
                    if k == ValueKind.MEMOP_SIZE:
                        lines.append(f"{v}:{c}")
                    else:
                        lines.append(f"{lookup(v) or EXTERNAL_SYMBOL}:{c}")
    lines.append("")
    return "\n".join(lines) + "\n"


#: is_ir → {number of counters: the whole ``--counts`` entry of a record as a %-template}.
_COUNTS_TEMPLATES: dict[bool, dict[int, str]] = {False: {}, True: {}}
#: Use :func:`_all_counts` for unfiltered ``--all-functions --counts`` (tests turn it off
#: to check it against the general loop).
ALL_COUNTS_FAST_PATH = True
#: Distinct counter counts cached per kind (a template is ~4 bytes per counter).
TEMPLATE_CACHE_LIMIT = 1024


def _counts_template(n: int, is_ir: bool) -> str:
    """The entry of a record with ``n`` (> 0) counters, formatted with
    ``(name, hash, *counts)``: one C-level format per record instead of an f-string
    and a ``", ".join(map(str, ...))``. Front-end profiles print the first counter as
    the function count and leave it out of the block counts (spec §7.1)."""
    blocks = ", ".join(["%d"] * (n if is_ir else n - 1))
    entry = "" if is_ir else "\n    Function count: %d"
    template = f"  %s:\n    Hash: 0x%016x\n    Counters: {n}{entry}\n    Block counts: [{blocks}]"
    cache = _COUNTS_TEMPLATES[is_ir]
    if len(cache) < TEMPLATE_CACHE_LIMIT:
        cache[n] = template
    return template


def show_text(profile: Profile, opts: ShowOptions) -> str:
    """The complete output of ``llvm-profdata show`` with ``opts`` for ``profile``."""
    out: list[str] = []
    is_ir = profile.is_ir
    default_cutoffs = DEFAULT_CUTOFFS if opts.llvm_version >= FULL_CUTOFFS_FROM else OLD_CUTOFFS
    cutoffs = list(opts.detailed_summary_cutoffs) or (
        list(default_cutoffs) if opts.detailed_summary else []
    )
    builder = SummaryBuilder()
    lookup = symbol_lookup(profile)
    stats = [_SiteStats() for _ in ValueKind]
    top: TopN | StdHeapTopN = StdHeapTopN(opts.topn) if opts.legacy else TopN(opts.topn)
    shown = below = 0
    if not opts.text and opts.list_below_cutoff:
        out.append(f"The list of functions with the maximum counter less than {opts.value_cutoff}:")
    if opts.text and is_ir:
        out.append(":ir")
    fn = opts.function
    show_all = opts.all_functions
    topn = opts.topn
    first = 0 if is_ir else 1
    detail = opts.ic_targets or opts.memop_sizes or opts.show_vtables
    text, covered, show_counts = opts.text, opts.covered, opts.counts
    value_cutoff, list_below = opts.value_cutoff, opts.list_below_cutoff
    want_cs = CS_FLAG_IN_FUNC_HASH if opts.showcs else 0
    append = out.append
    keep = builder.sink()
    templates = _COUNTS_TEMPLATES[is_ir]
    if (
        ALL_COUNTS_FAST_PATH
        and show_all
        and show_counts
        and not (text or covered or detail or topn or list_below or value_cutoff)
    ):
        shown = _all_counts(profile.records, is_ir, want_cs, keep, out)
        _footer(out, profile, opts, builder, cutoffs, shown, below, top, stats, lookup)
        return "\n".join(out) + "\n"
    # One pass in reader order; the checks are hoisted because this loop runs once
    # per function of files with tens of thousands of them.
    for rec in profile.records:
        h = rec.hash
        if is_ir and (h & CS_FLAG_IN_FUNC_HASH) != want_cs:
            continue
        name = rec.name
        show = show_all or (bool(fn) and fn in name)
        if show and text:
            append(record_text(rec, lookup)[:-1])
            continue
        counts = rec.counts
        n = len(counts)
        if n:
            pseudo = _PSEUDO.get(counts[0])
            if pseudo is None:  # PseudoHot/Warm records stay out of the summary
                keep(counts)
        else:
            pseudo = None
        if covered:
            if any(counts):
                append(name)
            continue
        if pseudo is not None:
            if show:
                if not shown:
                    append("Counters:")
                shown += 1
                append(
                    f"  {name}:\n    Hash: 0x{h:016x}\n    Counters: {len(counts)}    <{pseudo}>"
                )
            continue
        if value_cutoff or topn or list_below:
            fmax = max(counts) if counts else 0
            if fmax < value_cutoff:
                below += 1
                if list_below:
                    append(f"  {name}: (Max = {fmax} Sum = {sum(counts) & ((1 << 64) - 1)})")
                continue
            if list_below:
                continue
            if topn:
                top.offer(name, fmax)
        if not show:
            continue
        if not shown:
            append("Counters:")
        shown += 1
        if show_counts and not detail and n:
            # The common case (--all-functions --counts): one %-format per record.
            append((templates.get(n) or _counts_template(n, is_ir)) % (name, h, *counts))
            continue
        head = f"  {name}:\n    Hash: 0x{h:016x}\n    Counters: {n}"
        if not is_ir:
            head += f"\n    Function count: {counts[0]}"
        if detail:
            append(head)
            _value_details(out, rec, opts, stats, lookup, counts, first)
        elif show_counts:
            append(f"{head}\n    Block counts: []")
        else:
            append(head)
    if opts.text or opts.covered:
        return "\n".join(out) + "\n" if out else ""
    _footer(out, profile, opts, builder, cutoffs, shown, below, top, stats, lookup)
    return "\n".join(out) + "\n"


def _all_counts(
    records: Sequence[FunctionRecord],
    is_ir: bool,
    want_cs: int,
    keep: Callable[[Sequence[int]], None],
    out: list[str],
) -> int:
    """``--all-functions --counts`` without filters: the loop of :func:`show_text` cut
    down to what that case needs (the most common ``show`` of big files). Appends the
    ``Counters:`` block to ``out`` and returns the number of records shown."""
    append = out.append
    templates = _COUNTS_TEMPLATES[is_ir]
    pseudo_of = _PSEUDO.get
    start = len(out)
    append("Counters:")
    for rec in records:
        h = rec.hash
        if is_ir and (h & CS_FLAG_IN_FUNC_HASH) != want_cs:
            continue
        counts = rec.counts
        n = len(counts)
        if n:
            pseudo = pseudo_of(counts[0])
            if pseudo is None:
                keep(counts)
                append((templates.get(n) or _counts_template(n, is_ir)) % (rec.name, h, *counts))
            else:
                append(f"  {rec.name}:\n    Hash: 0x{h:016x}\n    Counters: {n}    <{pseudo}>")
            continue
        head = f"  {rec.name}:\n    Hash: 0x{h:016x}\n    Counters: 0"
        if not is_ir:
            head += f"\n    Function count: {counts[0]}"  # IndexError, as in show_text
        append(f"{head}\n    Block counts: []")
    shown = len(out) - start - 1
    if not shown:
        out.pop()
    return shown


def _value_details(
    out: list[str],
    rec: FunctionRecord,
    opts: ShowOptions,
    stats: list[_SiteStats],
    lookup: Callable[[int], str],
    counts: list[int],
    first: int,
) -> None:
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


def _footer(
    out: list[str],
    profile: Profile,
    opts: ShowOptions,
    builder: SummaryBuilder,
    cutoffs: list[int],
    shown: int,
    below: int,
    top: TopN | StdHeapTopN,
    stats: list[_SiteStats],
    lookup: Callable[[int], str],
) -> None:
    summary = builder.build(cutoffs)
    kind = profile.kind
    legacy = opts.legacy
    if profile.is_ir:
        level = (
            f"Instrumentation level: IR  entry_first = {int(bool(kind & ProfileKind.ENTRY_FIRST))}"
        )
        if not legacy:
            loops = int(bool(kind & ProfileKind.INSTR_LOOP_ENTRIES))
            level += f"  instrument_loop_entries = {loops}"
        out.append(level)
    else:
        out.append("Instrumentation level: Front-end")
    if opts.all_functions or opts.function:
        out.append(f"Functions shown: {shown}")
    out.append(f"Total functions: {summary.total_num_functions}")
    cutoff_lines = []
    if opts.value_cutoff > 0:
        above = (summary.total_num_functions - below) & 0xFFFFFFFF
        cutoff_lines = [
            f"Number of functions with maximum count (< {opts.value_cutoff}): {below}",
            f"Number of functions with maximum count (>= {opts.value_cutoff}): {above}",
        ]
    if legacy:
        out.extend(cutoff_lines)
    out.append(f"Maximum function count: {summary.max_function_count}")
    out.append(f"Maximum internal block count: {summary.max_internal_block_count}")
    totals = [
        f"Total number of blocks: {summary.total_num_blocks}",
        f"Total count: {summary.total_block_count}",
    ]
    if not legacy:
        out.extend(totals)
        out.extend(cutoff_lines)
    if opts.topn:
        out.append(f"Top {opts.topn} functions with the largest internal block counts: ")
        out.extend(f"  {name}, max count = {m}" for m, name in top.ordered())
    if shown and opts.ic_targets:
        _site_stats(out, "Statistics for indirect call sites profile:", stats[0])
    if shown and opts.show_vtables:
        _site_stats(out, "Statistics for vtable profile:", stats[2])
    if shown and opts.memop_sizes:
        _site_stats(out, "Statistics for memory intrinsic calls sizes profile:", stats[1])
    if opts.detailed_summary:
        if legacy:
            out.extend(totals)
        out.append("Detailed summary:")
        total = summary.total_num_blocks
        for e in summary.entries:
            if legacy:
                out.append(
                    f"{e.num_counts} blocks with count >= {e.min_count} account for "
                    f"{cutoff_percent(e.cutoff)} percentage of the total counts."
                )
                continue
            pct = f" ({_c_percent(e.num_counts, total)})" if total else " (0.00%)"
            out.append(
                f"{e.num_counts} blocks{pct} with count >= {e.min_count} account for "
                f"{cutoff_percent(e.cutoff)}% of the total counts."
            )
    # Raw and text readers print nothing without IDs; the indexed reader of LLVM 19+
    # prints the header even then (verified against llvm-profdata 14, 16, 19, 22).
    if opts.binary_ids and (
        profile.binary_ids
        or (profile.format == "indexed" and opts.llvm_version >= INDEXED_EMPTY_IDS_HEADER_FROM)
    ):
        out.append("Binary IDs: ")
        out.extend(b.hex() for b in profile.binary_ids)
    if opts.profile_version:
        word = profile.version_word if profile.format == "raw" else profile.version
        out.append(f"Profile version: {word if word is not None else 0}")
    if opts.temporal_traces:
        traces = profile.temporal_traces
        out.append(
            f"Temporal Profile Traces (samples={len(traces)} "
            f"seen={profile.temporal_trace_stream_size}):"
        )
        for i, t in enumerate(traces):
            out.append(
                f"  Temporal Profile Trace {i} (weight={t.weight} count={len(t.function_refs)}):"
            )
            out.extend(f"    {lookup(ref)}" for ref in t.function_refs)


__all__ = [
    "NEW_WORDING_FROM",
    "ShowOptions",
    "cutoff_percent",
    "record_text",
    "show_text",
    "symbol_lookup",
]
