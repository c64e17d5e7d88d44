"""The text of ``llvm-profdata show`` for instrumentation profiles (LLVM 22 wording, spec §7.1).

:func:`show_text` mirrors ``showInstrProfile`` line for line: the same record filter
(CS records only with ``showcs`` on IR profiles), the same summary recomputed from the
shown records, the same ``--topn`` order for equal counts and the same float formatting
of cutoff percentages. ``ShowOptions.llvm_version`` picks the wording of older releases
(verified against llvm-profdata 14, 16, 19 and 22). profkit's own machine-readable
variant is :func:`profkit.present.instrprof.json_show.show_json`. This module prints the
records; value-profile sites are :mod:`.show_values`' and what follows the records is
:mod:`.show_footer`'s.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from profkit.formats.instrprof.model import (
    CS_FLAG_IN_FUNC_HASH,
    FunctionRecord,
    Profile,
    ValueKind,
)
from profkit.formats.instrprof.summary import SummaryBuilder
from profkit.present.instrprof.show_footer import cutoff_percent, footer
from profkit.present.instrprof.show_options import (
    NEW_WORDING_FROM,
    ShowOptions,
    symbol_lookup,
)
from profkit.present.instrprof.show_values import SiteStats, value_details
from profkit.present.instrprof.topn import StdHeapTopN, TopN

EXTERNAL_SYMBOL = "** External Symbol **"
_PSEUDO = {(1 << 64) - 1: "PseudoHot", (1 << 64) - 2: "PseudoWarm"}
_KIND_DESCR = ("IPVK_IndirectCallTarget", "IPVK_MemOPSize", "IPVK_VTableTarget")


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
    builder = SummaryBuilder()
    lookup = symbol_lookup(profile)
    stats = [SiteStats() for _ in ValueKind]
    top: TopN | StdHeapTopN = StdHeapTopN(opts.topn) if opts.legacy else TopN(opts.topn)
    if not opts.text and opts.list_below_cutoff:
        out.append(f"The list of functions with the maximum counter less than {opts.value_cutoff}:")
    if opts.text and profile.is_ir:
        out.append(":ir")
    detail = opts.ic_targets or opts.memop_sizes or opts.show_vtables
    filtered = opts.topn or opts.list_below_cutoff or opts.value_cutoff
    if (
        ALL_COUNTS_FAST_PATH
        and opts.all_functions
        and opts.counts
        and not (opts.text or opts.covered or detail or filtered)
    ):
        want_cs = CS_FLAG_IN_FUNC_HASH if opts.showcs else 0
        shown = _all_counts(profile.records, profile.is_ir, want_cs, builder.sink(), out)
        below = 0
    else:
        shown, below = _each_record(profile, opts, builder.sink(), lookup, stats, top, out)
        if opts.text or opts.covered:
            return "\n".join(out) + "\n" if out else ""
    footer(out, profile, opts, builder, shown, below, top, stats, lookup)
    return "\n".join(out) + "\n"


def _each_record(
    profile: Profile,
    opts: ShowOptions,
    keep: Callable[[Sequence[int]], None],
    lookup: Callable[[int], str],
    stats: list[SiteStats],
    top: TopN | StdHeapTopN,
    out: list[str],
) -> tuple[int, int]:
    """The general loop of :func:`show_text`, one pass in reader order: appends the
    records to ``out`` and returns (records shown, records under ``--value-cutoff``).
    The checks are hoisted because this loop runs once per function of files with tens
    of thousands of them."""
    is_ir = profile.is_ir
    fn, show_all, topn = opts.function, opts.all_functions, opts.topn
    detail = opts.ic_targets or opts.memop_sizes or opts.show_vtables
    text, covered, show_counts = opts.text, opts.covered, opts.counts
    value_cutoff, list_below = opts.value_cutoff, opts.list_below_cutoff
    want_cs = CS_FLAG_IN_FUNC_HASH if opts.showcs else 0
    append = out.append
    templates = _COUNTS_TEMPLATES[is_ir]
    shown = below = 0
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
                append(f"  {name}:\n    Hash: 0x{h:016x}\n    Counters: {n}    <{pseudo}>")
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
        _record_entry(out, rec, is_ir, opts, stats, lookup)
    return shown, below


def _record_entry(
    out: list[str],
    rec: FunctionRecord,
    is_ir: bool,
    opts: ShowOptions,
    stats: list[SiteStats],
    lookup: Callable[[int], str],
) -> None:
    """A shown record outside the common case: value-profile details, no counters, or
    ``--counts`` off. Front-end profiles print the first counter as the function count."""
    counts = rec.counts
    head = f"  {rec.name}:\n    Hash: 0x{rec.hash:016x}\n    Counters: {len(counts)}"
    if not is_ir:
        head += f"\n    Function count: {counts[0]}"
    if opts.ic_targets or opts.memop_sizes or opts.show_vtables:
        out.append(head)
        value_details(out, rec, opts, stats, lookup, counts, 0 if is_ir else 1)
    elif opts.counts:
        out.append(f"{head}\n    Block counts: []")
    else:
        out.append(head)


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


__all__ = [
    "NEW_WORDING_FROM",
    "ShowOptions",
    "cutoff_percent",
    "record_text",
    "show_text",
    "symbol_lookup",
]
