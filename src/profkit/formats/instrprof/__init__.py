"""LLVM instrumentation profiles: raw (.profraw), indexed (.profdata) and text (.proftext).

See ``docs/instrprof.md`` for the public API.
"""

from profkit.formats.instrprof.indexed import parse_indexed
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
from profkit.formats.instrprof.raw import parse_raw
from profkit.formats.instrprof.reader import parse_profile, read_profile, sniff
from profkit.formats.instrprof.summary import compute_summary

__all__ = [
    "CS_FLAG_IN_FUNC_HASH",
    "FunctionRecord",
    "Profile",
    "ProfileKind",
    "Summary",
    "SummaryEntry",
    "TemporalTrace",
    "ValueKind",
    "compute_summary",
    "parse_indexed",
    "parse_profile",
    "parse_raw",
    "read_profile",
    "sniff",
]
