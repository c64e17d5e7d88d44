"""The .NET heap census: run an assembly, and at its end take the census of its heap.

``profkit heap run app.dll ARGS`` comes here. The program runs as a child under
``libprofkit_clr.so`` with ``PROFKIT_CLR_HEAP`` set: at the runtime's Shutdown the
profiler forces a full GC from a thread of its own and writes every live object, root
and name the GC and metadata give (see ``csrc/census.h``); :mod:`profkit.clr.censusfile`
reads it. Setting ``COR_PRF_MONITOR_GC`` (which the census needs, from the start) turns
the runtime's concurrent GC off for the run, and every GC of the run then walks the heap
for the profiler too: the census costs the program time, never its output or status.
Library code: it prints nothing and never exits.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from profkit.clr.assembly import check_assembly
from profkit.clr.censusfile import Census, read_census
from profkit.clr.environment import profiler_environment
from profkit.clr.host import find_host
from profkit.engine.child import run_child
from profkit.engine.contract import Outcome
from profkit.errors import FormatError, UsageError
from profkit.settings import Settings

#: the census's own HRESULT for a forced GC it stopped waiting for (csrc/census.c)
GC_TIMEOUT = 0x800705B4


@dataclass(slots=True)
class CensusOutcome:
    """How the program ended, and its census or one line saying why there is none."""

    ended: Outcome
    census: Census | None = None
    problem: str | None = None


def run_census(
    assembly: str,
    args: Sequence[str],
    census_path: str,
    *,
    dotnet: str | None = None,
    at_ns: int = 0,
    environ: Mapping[str, str] | None = None,
    stdin: Any = None,
    stdout: Any = None,
    stderr: Any = None,
) -> CensusOutcome:
    """Run ``dotnet assembly args`` with the census written to ``census_path`` (a new
    file, with its graph beside it: FILE.objects, FILE.refs).
    ``at_ns`` > 0: the census is taken that long after the runtime's start, in a full GC
    forced then (the end's census when the program ends first).

    Raises :class:`UsageError` before starting anything when the assembly or the host is
    unusable; a program that ends without a census is a :attr:`CensusOutcome.problem`.
    """
    check_assembly(assembly)
    base_env = dict(os.environ if environ is None else environ)
    host = find_host(dotnet, base_env)
    env = base_env | profiler_environment(Settings(), events=("gc",))
    env["PROFKIT_CLR_HEAP"] = os.path.abspath(census_path)
    env.pop("PROFKIT_CLR_HEAP_AT", None)
    if at_ns > 0:
        env["PROFKIT_CLR_HEAP_AT"] = str(at_ns)
    with run_child(
        [host.path, assembly, *args], env=env, stdin=stdin, stdout=stdout, stderr=stderr
    ) as child:
        ended = child.wait()
    outcome = CensusOutcome(ended)
    if not os.path.exists(census_path):
        how = (
            f"died of signal {ended.died_of}"
            if ended.died_of
            else "ended before the runtime's shutdown"
        )
        outcome.problem = f"no heap census: the program {how} (a census is taken at a normal end)"
        return outcome
    try:
        outcome.census = read_census(census_path)
    except (FormatError, UsageError) as exc:
        outcome.problem = f"the heap census is unusable: {exc}"
        return outcome
    outcome.problem = refused(outcome.census)
    if outcome.problem:
        outcome.census = None
    return outcome


def refused(census: Census) -> str | None:
    """Why a census file holds no census (its forced GC failed or timed out), else None."""
    status = census.gc_status & 0xFFFFFFFF
    if status == GC_TIMEOUT:
        return "no heap census: the forced GC did not end within 600 s"
    if census.gc_status < 0:
        return f"no heap census: the runtime refused to force a GC (HRESULT 0x{status:08x})"
    return None
