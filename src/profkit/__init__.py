"""profkit: a profiling toolkit for performance engineers.

One package and one command line (``profkit``) for:

* Python programs profiled in process: :mod:`profkit.api`, a profiling API after the .NET CLR
  Profiling API, :mod:`profkit.collect` driving it, and :mod:`profkit.profilers` built on it
  (the ELT call tree in trace and sample modes, memory);
* Python programs sampled from outside (:mod:`profkit.sampler`) and .NET programs, traced by
  a native CoreCLR profiler (:mod:`profkit.clr`) or sampled through the diagnostics port
  (:mod:`profkit.dotnet`); :mod:`profkit.runner` runs any of them like its interpreter would;
* one call-tree profile for all of them (:mod:`profkit.calltree`), read by
  :mod:`profkit.report`, :mod:`profkit.export` and the live :mod:`profkit.monitor`;
* file formats as libraries (:mod:`profkit.formats`): LLVM instrumentation profiles, .NET
  perf maps and ReadyToRun images, Linux ``perf-PID.map`` files, EventPipe nettrace.

The version is written once, here (``pyproject.toml`` reads it: ``[tool.hatch.version]``).

Importing :mod:`profkit` itself is cheap on purpose: the start-up hook runs in every Python
process once the package is installed, so nothing heavy is imported here.
"""

__version__ = "0.1.0"

__all__ = ["__version__", "load_ipython_extension"]


def load_ipython_extension(ipython: object) -> None:
    """``%load_ext profkit`` in IPython or Jupyter: the ``%profkit`` / ``%%profkit`` magics.

    Here so that the extension's name is the package's; the work (and IPython) is imported
    only when the extension is loaded (:mod:`profkit.jupyter`).
    """
    from profkit.jupyter import load_ipython_extension as load

    load(ipython)
