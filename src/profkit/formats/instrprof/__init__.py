"""LLVM instrumentation profiles: raw (.profraw), indexed (.profdata) and text (.proftext).

See ``docs/instrprof.md`` for the public API.

Every public name is imported on first use (PEP 562), not with the package: importing
one submodule (``profkit profdata show`` needs only the readers) must not pay for the
writers, merge and overlap, and must never pull in numpy. Bytes ↔ model only: what
``show`` and ``overlap`` print lives in :mod:`profkit.present.instrprof`. Submodule names
differ from the exported names (the overlap code lives in ``overlap_calc``), so
importing a submodule never shadows an exported function.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from profkit._lazy import lazy_exports

if TYPE_CHECKING:  # the same names, eagerly, for type checkers and IDEs
    from profkit.formats.instrprof.indexed import parse_indexed
    from profkit.formats.instrprof.indexed_writer import build_indexed, write_indexed
    from profkit.formats.instrprof.merge import ProfileMerger, merge_profiles
    from profkit.formats.instrprof.merge.files import MergeInput
    from profkit.formats.instrprof.merge.request import MergeRequest, MergeResult, merge_inputs
    from profkit.formats.instrprof.model import (
        CS_FLAG_IN_FUNC_HASH,
        FunctionRecord,
        Profile,
        ProfileKind,
        Summary,
        SummaryEntry,
        TemporalTrace,
        ValueKind,
    )
    from profkit.formats.instrprof.overlap_calc import overlap
    from profkit.formats.instrprof.raw import parse_raw
    from profkit.formats.instrprof.reader import parse_profile, read_profile, sniff
    from profkit.formats.instrprof.summary import compute_summary
    from profkit.formats.instrprof.text import parse_text
    from profkit.formats.instrprof.text_writer import format_text, write_text

#: Exported name → the submodule (of this package) that defines it.
_EXPORTS: dict[str, str] = {
    "CS_FLAG_IN_FUNC_HASH": "model",
    "FunctionRecord": "model",
    "MergeInput": "merge.files",  # numpy and multiprocessing: only when asked for
    "MergeRequest": "merge.request",
    "MergeResult": "merge.request",
    "Profile": "model",
    "ProfileKind": "model",
    "ProfileMerger": "merge",
    "Summary": "model",
    "SummaryEntry": "model",
    "TemporalTrace": "model",
    "ValueKind": "model",
    "build_indexed": "indexed_writer",
    "compute_summary": "summary",
    "format_text": "text_writer",
    "merge_inputs": "merge.request",
    "merge_profiles": "merge",
    "overlap": "overlap_calc",
    "parse_indexed": "indexed",
    "parse_profile": "reader",
    "parse_raw": "raw",
    "parse_text": "text",
    "read_profile": "reader",
    "sniff": "reader",
    "write_indexed": "indexed_writer",
    "write_text": "text_writer",
}

__all__ = [
    "CS_FLAG_IN_FUNC_HASH",
    "FunctionRecord",
    "MergeInput",
    "MergeRequest",
    "MergeResult",
    "Profile",
    "ProfileKind",
    "ProfileMerger",
    "Summary",
    "SummaryEntry",
    "TemporalTrace",
    "ValueKind",
    "build_indexed",
    "compute_summary",
    "format_text",
    "merge_inputs",
    "merge_profiles",
    "overlap",
    "parse_indexed",
    "parse_profile",
    "parse_raw",
    "parse_text",
    "read_profile",
    "sniff",
    "write_indexed",
    "write_text",
]


__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)
