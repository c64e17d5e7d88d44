"""Ready-made profilers built only on :mod:`profkit.api`.

* :mod:`profkit.profilers.elt` — the ELT call-tree profiler (``EltProfiler``, trace mode)
  and its sampling twin (``SamplingProfiler``), used by ``profkit run``.

A user's profiler is a peer of these: any ``ProfilerCallback`` subclass, loaded by
``PROFKIT_PROFILER=pkg.module:Class``.
"""
