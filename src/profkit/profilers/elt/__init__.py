"""The ELT call-tree profiler: ``profkit.profilers.elt:EltProfiler`` (and ``:SamplingProfiler``).

See ``docs/elt.md`` for the settings, the event-line format and base-time semantics.
"""

from profkit.profilers.elt.profiler import INTERNAL_MODULES, EltProfiler, SamplingProfiler

__all__ = ["INTERNAL_MODULES", "EltProfiler", "SamplingProfiler"]
