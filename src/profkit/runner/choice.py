"""The one place that decides how a target is run and which profiler records it.

A **target** is what the user asked to run (a Python script, ``-m`` module or ``-c``
code today; a .NET assembly next). An **engine** runs one kind of target under one kind of
profiler and hands back how it ended and the profile it recorded. :data:`CHOICES` is the
table: ``(target kinds, mode) -> engine, profiler``; :func:`choose` is consulted once per
run, and its answer is used for the program *and* for its child processes (the choice
used to be made twice, once for each).

To plug in another kind of target or profiler, add a row (before a row it should win
over) whose engine satisfies :class:`~profkit.engine.contract.Engine`; an engine whose
``unavailable`` gives a reason is skipped with that reason noted, and the next matching row is used
(e.g. an out-of-process sampler falling back to the in-process one where reading another
process is not allowed).
"""

from __future__ import annotations

from collections.abc import Callable

from profkit.engine.contract import (
    PYTHON_KINDS,
    Engine,
    Finished,
    Job,
    ProfilerChoice,
    Target,
)
from profkit.errors import UsageError
from profkit.settings import Settings

# The contract lives below the runner (profkit.engine.contract) so that engines import it
# without importing the runner; these names stay importable from here.
__all__ = [
    "CHOICES",
    "PYTHON_KINDS",
    "Engine",
    "Finished",
    "Job",
    "ProfilerChoice",
    "Target",
    "choose",
]

_IN_PROCESS = "profkit.runner.inprocess:InProcessEngine"

CHOICES: tuple[ProfilerChoice, ...] = (
    ProfilerChoice("trace", PYTHON_KINDS, _IN_PROCESS, "profkit.profilers.elt:EltProfiler"),
    # Sampled from outside when this machine allows reading a child's memory (no GIL bias);
    # else the in-process sampler below, with the reason on stderr.
    ProfilerChoice("sample", PYTHON_KINDS, "profkit.sampler.engine:OutOfProcessEngine", ""),
    ProfilerChoice("sample", PYTHON_KINDS, _IN_PROCESS, "profkit.profilers.elt:SamplingProfiler"),
    # Sampled allocations (bytes by stack) in-process, through the API's OBJECT_ALLOCATED.
    ProfilerChoice("memory", PYTHON_KINDS, _IN_PROCESS, "profkit.profilers.memory:MemoryProfiler"),
    ProfilerChoice("trace", ("dotnet",), "profkit.clr.engine:DotnetEngine", profiler=""),
    # Sampled from outside through the runtime's diagnostics port (EventPipe).
    ProfilerChoice("sample", ("dotnet",), "profkit.dotnet.engine:SampleEngine", profiler=""),
    # Allocations through the native profiler's ObjectAllocated, followed across GCs;
    # PROFKIT_DOTNET_MEMORY=events chooses the next row (bench/dotnet_memory_bench.py).
    ProfilerChoice("memory", ("dotnet",), "profkit.clr.memory_engine:NativeMemoryEngine", ""),
    # Allocations from the runtime's own GCAllocationTick events (EventPipe).
    ProfilerChoice("memory", ("dotnet",), "profkit.dotnet.memory_engine:MemoryEngine", ""),
)


def choose(
    target: Target, settings: Settings, say: Callable[[str], None]
) -> tuple[ProfilerChoice, Engine]:
    """The first row serving ``target.kind`` and ``settings.mode`` whose engine can run."""
    reasons: list[str] = []
    for row in CHOICES:
        if row.mode != settings.mode or target.kind not in row.kinds:
            continue
        engine = row.load_engine()
        job = Job(target, settings, row, say)
        reason = engine.unavailable(job)
        if reason is None:
            for earlier in reasons:
                say(f"profkit: note: {earlier}; using {row.engine.rpartition(':')[2]}\n")
            return row, engine
        reasons.append(reason)
    why = f" ({'; '.join(reasons)})" if reasons else ""
    raise UsageError(f"--mode {settings.mode} cannot run a {target.kind} target{why}")
