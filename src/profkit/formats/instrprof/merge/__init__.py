"""Merging instrumentation profiles with ``llvm-profdata merge`` semantics (spec §7.2).

One subpackage, one step per module, from the smallest to the largest unit:

- :mod:`.records` — one record into another (``InstrProfRecord::merge``): counters
  added with saturation, bitmaps OR-ed, value sites merged, sorted and cut;
- :mod:`.accumulator` — :class:`ProfileMerger`, LLVM's ``InstrProfWriter``: records
  keyed by (name, hash), kind checks, temporal traces, combining writers (``-j``);
- :mod:`.raw_shape` — the "shape" of a raw file (what must be equal for files of one
  binary to be added as arrays) and where its varying sections are;
- :mod:`.raw_arrays` — :class:`~.raw_arrays.ShapeAccumulator`: whole counter sections
  of same-shape raw files summed as numpy arrays (imported only for raw inputs);
- :mod:`.files` — many files, serially or on worker processes, replayed in input order;
- :mod:`.workers` — the ``-j`` worker processes' life cycle (they never outlive a merge);
- :mod:`.on_dask` — the same partial results on dask.distributed, reduced as a tree.

The names of :mod:`.accumulator` and :mod:`.records` are re-exported here: importing
this package costs neither numpy nor multiprocessing.
"""

from __future__ import annotations

from profkit.formats.instrprof.merge.accumulator import (
    MAX_TRACE_LENGTH,
    TRACE_RESERVOIR_SIZE,
    KindMismatchError,
    MergeState,
    ProfileMerger,
    describe_kind,
    drop_all_zero,
    is_front_end,
    merge_profiles,
)
from profkit.formats.instrprof.merge.records import (
    BITMAP_MISMATCH,
    COUNT_MISMATCH,
    COUNTER_OVERFLOW,
    MAX_COUNT,
    MAX_VALUES_PER_SITE,
    U64_MAX,
    VALUE_SITE_MISMATCH,
    Warn,
    merge_into,
    merge_site,
    merge_value_sites,
    new_record,
    scale_and_sort_sites,
    sort_site,
)

__all__ = [
    "BITMAP_MISMATCH",
    "COUNTER_OVERFLOW",
    "COUNT_MISMATCH",
    "MAX_COUNT",
    "MAX_TRACE_LENGTH",
    "MAX_VALUES_PER_SITE",
    "TRACE_RESERVOIR_SIZE",
    "U64_MAX",
    "VALUE_SITE_MISMATCH",
    "KindMismatchError",
    "MergeState",
    "ProfileMerger",
    "Warn",
    "describe_kind",
    "drop_all_zero",
    "is_front_end",
    "merge_into",
    "merge_profiles",
    "merge_site",
    "merge_value_sites",
    "new_record",
    "scale_and_sort_sites",
    "sort_site",
]
