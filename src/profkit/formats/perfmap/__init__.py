"""perf maps: .NET R2R perf maps, Linux perf-PID.map, perfinfo; address → name.

Readers take bytes (``read_*``) or a path (``load_*``) and raise
:class:`~profkit.errors.PerfMapFormatError` naming the file and line; writers return
bytes (``write_*``) or write atomically (``save_*``). :func:`sniff` tells the kinds apart,
:func:`concat_maps` joins r2rmaps placed at their bases into perf-map lines, and
:class:`Symbolizer` resolves addresses over any number of maps. See ``docs/perfmap.md``.
"""

from profkit.formats.perfmap.concat import PlacedMap, concat_maps, place_r2rmap
from profkit.formats.perfmap.perfinfo import (
    PerfInfo,
    PerfInfoRecord,
    load_perfinfo,
    read_perfinfo,
    write_perfinfo,
)
from profkit.formats.perfmap.perfpid import (
    PerfMap,
    PerfMapEntry,
    load_perf_map,
    read_perf_map,
    save_perf_map,
    write_perf_map,
)
from profkit.formats.perfmap.r2rmap import (
    HeaderToken,
    PerfMapAbi,
    PerfMapArchitecture,
    PerfMapOS,
    R2REntry,
    R2RHeader,
    R2RPerfMap,
    load_r2rmap,
    read_r2rmap,
    save_r2rmap,
    write_r2rmap,
)
from profkit.formats.perfmap.signature import compute_signature, verify_map
from profkit.formats.perfmap.sniff import read_any_map, sniff
from profkit.formats.perfmap.symbolizer import BatchLookup, Symbol, Symbolizer

__all__ = [
    "BatchLookup",
    "HeaderToken",
    "PerfInfo",
    "PerfInfoRecord",
    "PerfMap",
    "PerfMapAbi",
    "PerfMapArchitecture",
    "PerfMapEntry",
    "PerfMapOS",
    "PlacedMap",
    "R2REntry",
    "R2RHeader",
    "R2RPerfMap",
    "Symbol",
    "Symbolizer",
    "compute_signature",
    "concat_maps",
    "load_perf_map",
    "load_perfinfo",
    "load_r2rmap",
    "place_r2rmap",
    "read_any_map",
    "read_perf_map",
    "read_perfinfo",
    "read_r2rmap",
    "save_perf_map",
    "save_r2rmap",
    "sniff",
    "verify_map",
    "write_perf_map",
    "write_perfinfo",
    "write_r2rmap",
]
