"""The text ``llvm-profdata overlap`` prints, from an :class:`OverlapResult` (spec §7.4).

Presentation only: the arithmetic lives in :mod:`profkit.formats.instrprof.overlap_calc`.
Percentages are formatted from the same IEEE doubles LLVM computes, so they agree to the
last digit; ``llvm_version`` picks the wording (14–19 spell "infomation").
"""

from __future__ import annotations

from profkit.formats.instrprof.model import ValueKind
from profkit.formats.instrprof.overlap_calc import OverlapResult, OverlapStats
from profkit.formats.instrprof.versions import NEWEST_REPRODUCED

_KIND_NAMES = {
    ValueKind.INDIRECT_CALL_TARGET: "IndirectCall",
    ValueKind.MEMOP_SIZE: "MemOP",
    ValueKind.VTABLE_TARGET: "VTable",
}


def _dump(
    stats: OverlapStats, program_level: bool, base_name: str, test_name: str, llvm_version: int
) -> list[str]:
    entry = "functions" if program_level else "edge counters"
    out = []
    if program_level:
        word = "information" if llvm_version >= 22 else "infomation"
        out.append(
            f"Profile overlap {word} for base_profile: {base_name} and test_profile: {test_name}"
        )
        out.append("Program level:")
    else:
        out.append("Function level:")
        out.append(f"  Function: {stats.func_name} (Hash={stats.func_hash})")
    out.append(f"  # of {entry} overlap: {stats.overlap.num_entries}")
    if stats.mismatch.num_entries:
        out.append(f"  # of {entry} mismatch: {stats.mismatch.num_entries}")
    if stats.unique.num_entries:
        out.append(f"  # of {entry} only in test_profile: {stats.unique.num_entries}")
    out.append(f"  Edge profile overlap: {stats.overlap.count_sum * 100:.3f}%")
    if stats.mismatch.num_entries:
        out.append(f"  Mismatched count percentage (Edge): {stats.mismatch.count_sum * 100:.3f}%")
    if stats.unique.num_entries:
        out.append(
            f"  Percentage of Edge profile only in test_profile: {stats.unique.count_sum * 100:.3f}%"
        )
    out.append(f"  Edge profile base count sum: {stats.base.count_sum:.0f}")
    out.append(f"  Edge profile test count sum: {stats.test.count_sum:.0f}")
    for kind in ValueKind:
        k = int(kind)
        if stats.base.value_counts[k] < 1.0 and stats.test.value_counts[k] < 1.0:
            continue
        name = _KIND_NAMES[kind]
        out.append(f"  {name} profile overlap: {stats.overlap.value_counts[k] * 100:.3f}%")
        if stats.mismatch.num_entries:
            out.append(
                f"  Mismatched count percentage ({name}): {stats.mismatch.value_counts[k] * 100:.3f}%"
            )
        if stats.unique.num_entries:
            out.append(
                f"  Percentage of {name} profile only in test_profile: {stats.unique.value_counts[k] * 100:.3f}%"
            )
        out.append(f"  {name} profile base count sum: {stats.base.value_counts[k]:.0f}")
        out.append(f"  {name} profile test count sum: {stats.test.value_counts[k]:.0f}")
    return out


def format_overlap(
    result: OverlapResult, base_name: str, test_name: str, *, llvm_version: int = NEWEST_REPRODUCED
) -> str:
    """The text ``llvm-profdata-<llvm_version> overlap`` prints (14–19 spell "infomation")."""
    if result.zero_sum_profile is not None:
        name = base_name if result.zero_sum_profile == "base" else test_name
        return f"Sum of edge counts for profile {name} is 0.\n"
    lines: list[str] = []
    for func in result.functions:
        lines += _dump(func, False, base_name, test_name, llvm_version)
    lines += _dump(result.program, True, base_name, test_name, llvm_version)
    return "\n".join(lines) + "\n"
