"""LLVM instrumentation profiles: raw (.profraw), indexed (.profdata) and text (.proftext).

See ``docs/instrprof.md`` for the public API.
"""

from typing import Any

from profkit.formats.instrprof.indexed import parse_indexed
from profkit.formats.instrprof.indexed_writer import build_indexed, write_indexed
from profkit.formats.instrprof.merge import ProfileMerger, merge_profiles
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
from profkit.formats.instrprof.overlap import format_overlap, overlap
from profkit.formats.instrprof.raw import parse_raw
from profkit.formats.instrprof.reader import parse_profile, read_profile, sniff
from profkit.formats.instrprof.summary import compute_summary
from profkit.formats.instrprof.text import format_text, parse_text, write_text

__all__ = [
    "CS_FLAG_IN_FUNC_HASH",
    "FunctionRecord",
    "MergeInput",
    "Profile",
    "ProfileKind",
    "ProfileMerger",
    "Summary",
    "SummaryEntry",
    "TemporalTrace",
    "ValueKind",
    "build_indexed",
    "compute_summary",
    "format_overlap",
    "format_text",
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


def __getattr__(name: str) -> Any:
    # The file-level merge pulls in numpy and multiprocessing; import it only when asked.
    # (Its function is not re-exported here: it shares its module's name.)
    if name == "MergeInput":
        import importlib

        return importlib.import_module("profkit.formats.instrprof.merge_files").MergeInput
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
