"""A nettrace file written by anyone, as a profile: ``profkit report/export FILE.nettrace``.

The runtime's own start-up tracing (``COMPlus_EnableEventPipe=1``, with
``COMPlus_EventPipeConfig`` and ``COMPlus_EventPipeOutputPath``), dotnet-trace, and
``profkit attach -o FILE.nettrace`` all write this format; whatever sample-profiler events
it holds become the same call-tree profile a live session makes, named by the method
events the file carries (a session's rundown is written at its end). A file with
``GCAllocationTick`` events and no samples (``attach --mode memory -o FILE.nettrace``)
becomes a memory profile (:mod:`profkit.dotnet.memory`). A file with neither is an error
that says so, rather than an empty profile.
"""

from __future__ import annotations

import os

from profkit.calltree.model import CallProfile
from profkit.dotnet.memory import MemoryCollector, build_memory_profile
from profkit.dotnet.profile import build_profile
from profkit.errors import FormatError

MAGIC = b"Nettrace"


def is_nettrace(path: str) -> bool:
    """Named ``*.nettrace``, or a file that starts like one."""
    if path.lower().endswith(".nettrace"):
        return True
    if path == "-" or not os.path.isfile(path):
        return False
    try:
        with open(path, "rb") as fh:
            return fh.read(len(MAGIC)) == MAGIC
    except OSError:
        return False


def profile_of_file(path: str, clock: str = "wall") -> CallProfile:
    """The call-tree profile of the samples in the nettrace file at ``path``."""
    from profkit.formats.nettrace import load_nettrace

    trace = load_nettrace(path)  # a cut file is an error naming the offset, as for any reader
    collector = MemoryCollector()  # a Collector that also keeps allocation ticks and GCs
    collector.header = trace.header
    collector.add_all(trace.events, trace.metadata)
    if not collector.samples and not collector.ticks:
        raise FormatError(
            "incompatible",
            "no sample-profiler events (Microsoft-DotNETCore-SampleProfiler) and no "
            "GCAllocationTick events in this trace: nothing to build a profile from",
            path=path,
        )
    meta = {
        "argv": [path],
        "nettrace": {
            "file": os.path.abspath(path),
            "format_version": trace.header.format_version,
            "lost_events": trace.lost_events,
        },
    }
    if not collector.samples:  # allocations only (attach --mode memory -o FILE.nettrace)
        return build_memory_profile(
            collector, trace.stacks, pid=trace.header.process_id, metadata=meta
        )
    return build_profile(
        collector, trace.stacks, pid=trace.header.process_id, clock=clock, metadata=meta
    )
