"""``profkit profdata show --json``: the same facts as ``show``, for scripts (schema in docs)."""

from __future__ import annotations

import json
from typing import Any

from profkit.formats.instrprof.model import Profile, ProfileKind, ValueKind
from profkit.formats.instrprof.summary import DEFAULT_CUTOFFS, SummaryBuilder
from profkit.present.instrprof.show_options import ShowOptions, symbol_lookup


def show_json(profile: Profile, opts: ShowOptions) -> str:
    """profkit's JSON rendering of what ``show`` reports (schema: ``docs/instrprof.md``)."""
    is_ir = profile.is_ir
    builder = SummaryBuilder()
    lookup = symbol_lookup(profile)
    functions: list[dict[str, Any]] = []
    fn = opts.function
    for rec in profile.records:
        if is_ir and rec.is_cs != opts.showcs:
            continue
        builder.add_counts(rec.counts)
        if not (opts.all_functions or (fn and fn in rec.name)):
            continue
        if opts.covered and not any(rec.counts):
            continue
        item: dict[str, Any] = {"name": rec.name, "hash": rec.hash, "counts": rec.counts}
        if rec.bitmap:
            item["bitmap"] = rec.bitmap.hex()
        if rec.value_sites:
            item["value_sites"] = {
                k.name.lower(): [
                    [
                        {"value": v, "count": c}
                        | ({"target": lookup(v)} if k != ValueKind.MEMOP_SIZE else {})
                        for v, c in site
                    ]
                    for site in sites
                ]
                for k, sites in rec.value_sites.items()
            }
        functions.append(item)
    s = builder.build(list(opts.detailed_summary_cutoffs) or list(DEFAULT_CUTOFFS))
    doc = {
        "format": profile.format,
        "version": profile.version,
        "version_word": profile.version_word,
        "instrumentation": "IR" if is_ir else "Front-end",
        "flags": [m.name.lower() for m in ProfileKind if m and m in profile.kind and m.name],
        "summary": {
            "total_functions": s.total_num_functions,
            "max_function_count": s.max_function_count,
            "max_internal_block_count": s.max_internal_block_count,
            "total_blocks": s.total_num_blocks,
            "total_count": s.total_block_count,
            "detailed": [
                {"cutoff": e.cutoff, "min_count": e.min_count, "num_blocks": e.num_counts}
                for e in s.entries
            ],
        },
        "binary_ids": [b.hex() for b in profile.binary_ids],
        "temporal_traces": [
            {"weight": t.weight, "functions": [lookup(r) for r in t.function_refs]}
            for t in profile.temporal_traces
        ],
        "functions": functions,
        "notes": profile.notes,
    }
    return json.dumps(doc, indent=1) + "\n"
