"""LLVM instrumentation profiles: raw (.profraw), indexed (.profdata) and text (.proftext).

See ``docs/instrprof.md`` for the public API.
"""

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

__all__ = [
    "CS_FLAG_IN_FUNC_HASH",
    "FunctionRecord",
    "Profile",
    "ProfileKind",
    "Summary",
    "SummaryEntry",
    "TemporalTrace",
    "ValueKind",
]
