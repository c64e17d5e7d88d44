"""Out-of-process sampling: read a Python process's stacks from outside (Linux).

``profkit attach PID``, ``profkit top PID``, ``profkit dump PID`` and
``profkit run --mode sample`` use this package; so can any program:

* :func:`sample_command` runs a command as a child and samples it until it exits;
* :class:`SamplerSession` samples a running pid (``run()``, then ``profiles()``);
* :func:`dump` is every thread's stack now.

Targets: CPython 3.11, 3.12 and 3.13, whatever profkit's own interpreter is. See
docs/sampler.md for how it finds the interpreter and what each mode measures.
"""

from profkit.sampler.command import SampleOutcome, sample_command
from profkit.sampler.dumping import dump, format_dump
from profkit.sampler.errors import AttachError, PermissionDenied, ProcessGone
from profkit.sampler.options import MODES, SamplerOptions, SamplerStats
from profkit.sampler.session import SamplerSession, sample_pid

__all__ = [
    "MODES",
    "AttachError",
    "PermissionDenied",
    "ProcessGone",
    "SampleOutcome",
    "SamplerOptions",
    "SamplerSession",
    "SamplerStats",
    "dump",
    "format_dump",
    "sample_command",
    "sample_pid",
]
