"""``profkit run --mode memory app.dll ARGS``: allocations through libprofkit_clr's ObjectAllocated.

The default engine of .NET memory mode (a row of :data:`profkit.runner.choice.CHOICES`,
before the EventPipe one): the program runs under the native profiler with
``PROFKIT_CLR_EVENTS=alloc,threads`` (no call hooks), as :func:`profkit.clr.launch.run_dotnet`
runs trace mode (its stdin, stdout, exit status its own; ``--alloc-sample`` is the
sampling mean, as for Python), and the result's allocation
records become the memory profile (:mod:`profkit.clr.allocprofile`). Why the default:
``bench/dotnet_memory_bench.py`` measured it closer to the program's own counts than the
GCAllocationTick estimate, at a cost within the issue's bound, and only it follows objects
across GCs (peak and leaked views). ``PROFKIT_DOTNET_MEMORY=events`` chooses the EventPipe
engine instead (:mod:`profkit.dotnet.memory_engine`; also what ``attach`` uses).
"""

from __future__ import annotations

import os
from typing import Any

from profkit.clr.engine import DotnetEngine, host_unavailable, target_of
from profkit.engine.contract import Finished, Job

#: the environment variable choosing .NET memory mode's engine: native (default) or events
ENGINE_VARIABLE = "PROFKIT_DOTNET_MEMORY"
EVENTS = ("alloc", "threads")


class NativeMemoryEngine(DotnetEngine):
    """Runs a :class:`~profkit.clr.engine.DotnetTarget` with allocations recorded natively."""

    def unavailable(self, job: Job) -> str | None:
        from profkit.clr.environment import library_path
        from profkit.errors import UsageError

        choice = os.environ.get(ENGINE_VARIABLE, "native").strip() or "native"
        if choice != "native":
            return f"{ENGINE_VARIABLE}={choice} (not native)"
        try:
            library_path()
        except UsageError as exc:
            return str(exc)
        return host_unavailable(job)

    def run(self, job: Job) -> Finished:
        from profkit.clr.allocprofile import to_memory_profile
        from profkit.clr.launch import run_dotnet

        target = target_of(job)
        environ = dict(os.environ, PROFKIT_CLR_ALLOC_SAMPLE=str(job.settings.alloc_sample_bytes))
        outcome = run_dotnet(
            target.assembly,
            target.args,
            settings=job.settings,
            dotnet=target.dotnet,
            events=EVENTS,
            environ=environ,
        )
        if outcome.refused is not None:  # the profiler said why, the program ran unprofiled
            return Finished(outcome.ended, None, unprofiled=outcome.refused)
        if outcome.result is None or outcome.result.alloc is None:
            job.say(f"profkit: error: {outcome.problem or 'no allocation records'}\n")
            return Finished(outcome.ended, None)
        settings = job.settings.as_dict()
        settings["mode"] = "memory"
        meta: dict[str, Any] = {
            "argv": [target.assembly, *target.args],
            "dotnet": outcome.host.path,
            "exit_status": outcome.status,
            "settings": settings,
        }
        profile = to_memory_profile(outcome.result, meta, job.settings.prefixes)
        m = profile.metadata
        job.say(
            f"profkit: allocations through ObjectAllocated: {m['allocated_bytes'] / 2**20:.1f} "
            f"MiB (the runtime's exact {m['runtime_allocated_bytes'] / 2**20:.1f} MiB), placed "
            f"on stacks by {m['alloc_samples']} samples, {m['alloc_estimator']}"
            + (
                f" ({m['unattributed_bytes'] / 2**20:.1f} MiB in strata no sample reached: "
                "[unattributed])"
                if m["unattributed_bytes"]
                else ""
            )
            + f"; peak of live samples {m['peak_bytes'] / 2**20:.1f} MiB; "
            f"{m['gc']['count']} GC(s)\n"
        )
        return Finished(outcome.ended, profile)
