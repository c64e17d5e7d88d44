"""What ``llvm-profdata show`` prints after the records: level, summary, statistics, IDs.

Why a module of its own: the footer is the summary side of ``show`` (the counts the
records add up to, the detailed cutoff table with C ``float`` rounding, value-site
statistics, binary IDs, version and temporal traces), each line in the wording of the
LLVM release asked for. :mod:`.llvm_show` prints the records and calls :func:`footer`.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

from profkit.formats.instrprof.model import Profile, ProfileKind, Summary
from profkit.formats.instrprof.summary import DEFAULT_CUTOFFS, SCALE, SummaryBuilder
from profkit.present.instrprof.show_options import ShowOptions
from profkit.present.instrprof.show_values import SiteStats, c_percent, site_stats
from profkit.present.instrprof.topn import StdHeapTopN, TopN

#: ``show --detailed-summary`` of LLVM 14 used a shorter default cutoff list (16 has the full one).
OLD_CUTOFFS = (800000, 900000, 950000, 990000, 999000, 999900, 999990)
FULL_CUTOFFS_FROM = 16
#: From this release an indexed file without binary IDs still prints "Binary IDs: ".
INDEXED_EMPTY_IDS_HEADER_FROM = 19


def _f32(x: float) -> float:
    return float(struct.unpack("f", struct.pack("f", x))[0])


def cutoff_percent(cutoff: int) -> str:
    """``format("%0.6g", (float)Cutoff / Scale * 100)`` with C ``float`` rounding."""
    return format(_f32(_f32(_f32(float(cutoff)) / _f32(float(SCALE))) * _f32(100.0)), "0.6g")


def footer(
    out: list[str],
    profile: Profile,
    opts: ShowOptions,
    builder: SummaryBuilder,
    shown: int,
    below: int,
    top: TopN | StdHeapTopN,
    stats: list[SiteStats],
    lookup: Callable[[int], str],
) -> None:
    """Append everything after the records (``shown`` printed, ``below`` under the cutoff)."""
    default_cutoffs = DEFAULT_CUTOFFS if opts.llvm_version >= FULL_CUTOFFS_FROM else OLD_CUTOFFS
    cutoffs = list(opts.detailed_summary_cutoffs) or (
        list(default_cutoffs) if opts.detailed_summary else []
    )
    summary = builder.build(cutoffs)
    legacy = opts.legacy
    out.append(_level(profile, legacy))
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
        site_stats(out, "Statistics for indirect call sites profile:", stats[0])
    if shown and opts.show_vtables:
        site_stats(out, "Statistics for vtable profile:", stats[2])
    if shown and opts.memop_sizes:
        site_stats(out, "Statistics for memory intrinsic calls sizes profile:", stats[1])
    if opts.detailed_summary:
        if legacy:
            out.extend(totals)
        _detailed_summary(out, summary, legacy)
    _trailer(out, profile, opts, lookup)


def _level(profile: Profile, legacy: bool) -> str:
    """The ``Instrumentation level:`` line (loop entries are printed from LLVM 20)."""
    if not profile.is_ir:
        return "Instrumentation level: Front-end"
    kind = profile.kind
    level = f"Instrumentation level: IR  entry_first = {int(bool(kind & ProfileKind.ENTRY_FIRST))}"
    if not legacy:
        loops = int(bool(kind & ProfileKind.INSTR_LOOP_ENTRIES))
        level += f"  instrument_loop_entries = {loops}"
    return level


def _detailed_summary(out: list[str], summary: Summary, legacy: bool) -> None:
    """``--detailed-summary``: one line per cutoff (with its share of blocks from LLVM 20)."""
    out.append("Detailed summary:")
    total = summary.total_num_blocks
    for e in summary.entries:
        if legacy:
            out.append(
                f"{e.num_counts} blocks with count >= {e.min_count} account for "
                f"{cutoff_percent(e.cutoff)} percentage of the total counts."
            )
            continue
        pct = f" ({c_percent(e.num_counts, total)})" if total else " (0.00%)"
        out.append(
            f"{e.num_counts} blocks{pct} with count >= {e.min_count} account for "
            f"{cutoff_percent(e.cutoff)}% of the total counts."
        )


def _trailer(
    out: list[str], profile: Profile, opts: ShowOptions, lookup: Callable[[int], str]
) -> None:
    """``--binary-ids``, ``--profile-version`` and ``--temporal-profile-traces``."""
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
