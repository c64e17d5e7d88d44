"""profkit: a profiling toolkit for performance engineers.

Four parts share one package and one command line (``profkit``):

* :mod:`profkit.api` — a profiling API for Python programs after the .NET CLR Profiling API;
* :mod:`profkit.profilers` — ready-made profilers built on that API (the ELT call-tree profiler);
* :mod:`profkit.formats.instrprof` — LLVM instrumentation profiles (raw, indexed, text);
* :mod:`profkit.formats.perfmap` — .NET R2R perf maps and Linux ``perf-PID.map`` files.

Importing :mod:`profkit` itself is cheap on purpose: the start-up hook runs in every Python
process once the package is installed, so nothing heavy is imported here.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
