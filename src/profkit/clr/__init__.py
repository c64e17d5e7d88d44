"""Profiling .NET programs: profkit's CoreCLR profiler and the Python side around it.

``libprofkit_clr.so`` (``csrc/*.c``) is loaded by the .NET runtime itself; this package
finds a host (:mod:`~profkit.clr.host`), recognises assemblies
(:mod:`~profkit.clr.assembly`), builds the profiler's environment
(:mod:`~profkit.clr.environment`), runs a program (:func:`run_dotnet`) and turns the
profiler's result file (:mod:`~profkit.clr.result`) into profkit's saved profile and a
perf map (:mod:`~profkit.clr.convert`). docs/clr.md is the user's guide.
"""

from __future__ import annotations

from profkit._lazy import lazy_exports

TYPE_CHECKING = False  # typing's, without importing typing at run time (profkit run's start-up)
if TYPE_CHECKING:
    from profkit.clr.environment import CLSID, library_path, profiler_environment
    from profkit.clr.launch import DotnetOutcome, run_dotnet

__all__ = ["CLSID", "DotnetOutcome", "library_path", "profiler_environment", "run_dotnet"]

#: Loaded on first use: every ``profkit run`` asks :mod:`profkit.clr.assembly` whether the
#: target is an assembly, and importing the launcher for that cost ~20 ms of each start-up.
__getattr__, __dir__ = lazy_exports(
    globals(),
    {
        "CLSID": "environment",
        "library_path": "environment",
        "profiler_environment": "environment",
        "DotnetOutcome": "launch",
        "run_dotnet": "launch",
    },
)
