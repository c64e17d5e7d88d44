"""Wire formats shared by profkit's producers and consumers.

Neutral ground: the ELT profiler's UDP sender, ``profkit monitor`` and a native producer
(the .NET profiler's C code) all speak :mod:`profkit.wire.udp`, so none of them imports
another. This package imports nothing from the rest of profkit.
"""
