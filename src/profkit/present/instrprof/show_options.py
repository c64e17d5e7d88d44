"""What ``show`` was asked for, shared by the LLVM-text and JSON renderings.

Its own module so that :mod:`.llvm_show` and :mod:`.json_show` both depend on it and
not on each other (they once imported each other).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from profkit.formats.instrprof.model import Profile
from profkit.formats.instrprof.versions import NEWEST_REPRODUCED

#: First llvm-profdata with the current ``show`` wording (19 and 22 are verified; 20 and 21
#: are assumed to follow 22, as ``instrument_loop_entries`` arrived in 20).
NEW_WORDING_FROM = 20


@dataclass(slots=True)
class ShowOptions:
    """The options of ``show`` that apply to instrumentation profiles."""

    all_functions: bool = False
    counts: bool = False
    function: str = ""
    topn: int = 0
    detailed_summary: bool = False
    detailed_summary_cutoffs: Sequence[int] = ()
    ic_targets: bool = False
    memop_sizes: bool = False
    show_vtables: bool = False
    binary_ids: bool = False
    text: bool = False
    showcs: bool = False
    covered: bool = False
    profile_version: bool = False
    temporal_traces: bool = False
    value_cutoff: int = 0
    list_below_cutoff: bool = False
    #: Which llvm-profdata's wording to reproduce: 20+ (default 22) or 19 and older.
    llvm_version: int = NEWEST_REPRODUCED

    @property
    def legacy(self) -> bool:
        """LLVM <= 19 wording: no ``instrument_loop_entries``, totals only in the detailed summary."""
        return self.llvm_version < NEW_WORDING_FROM


def symbol_lookup(profile: Profile) -> Callable[[int], str]:
    symtab = profile.symtab
    vtables = profile.vtable_names

    def lookup(ref: int) -> str:
        name = symtab.get(ref)
        if name is None:
            name = vtables.get(ref, "")
        return name

    return lookup
