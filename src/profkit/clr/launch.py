"""Running a .NET assembly under the profiler: the library entry :func:`run_dotnet`.

The program runs as a child process (``dotnet app.dll ARGS``) with the profiler's
environment added; its stdin, stdout and stderr are profkit's own, untouched, and its
exit status is reported as is (a signal as 128 + the signal number, as a shell does).
The profiler writes its result file into a private temporary directory; profkit reads
it after the process ended, turns it into a :class:`~profkit.calltree.CallProfile` and,
when asked, a perf map. Library code: it prints nothing and never exits.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence
from typing import Any

from profkit._record import field, record
from profkit.calltree.model import CallProfile
from profkit.clr.assembly import check_assembly
from profkit.clr.convert import perf_map_entries, to_profile
from profkit.clr.environment import profiler_environment
from profkit.clr.host import Host, find_host
from profkit.clr.result import ClrResult, load_result
from profkit.engine.child import run_child
from profkit.engine.contract import Outcome
from profkit.errors import FormatError, UsageError
from profkit.settings import Settings


@record
class DotnetOutcome:
    """How the .NET program ended and what the profiler recorded."""

    status: int  #: exit status as a shell reports it (128 + N after signal N)
    host: Host
    signal: int | None = None
    #: how the program ended, for the runner (:func:`profkit.engine.child`'s one mapping)
    ended: Outcome = field(default_factory=lambda: Outcome(0))
    result: ClrResult | None = None
    profile: CallProfile | None = None
    #: why there is no profile (the process died before the profiler wrote its file)
    problem: str | None = None
    #: the profiler's line when the runtime refused it at start (already on stderr: the
    #: program ran unprofiled), else None
    refused: str | None = None
    perf_map: str | None = None
    notes: list[str] = field(default_factory=list)


def run_dotnet(
    assembly: str,
    args: Sequence[str] = (),
    *,
    settings: Settings | None = None,
    dotnet: str | None = None,
    events: tuple[str, ...] | None = None,
    perf_map: str | None = None,
    environ: Mapping[str, str] | None = None,
    stdin: Any = None,
    stdout: Any = None,
    stderr: Any = None,
) -> DotnetOutcome:
    """Run ``dotnet assembly args`` profiled; return its outcome.

    ``perf_map``: a path (``{pid}`` is replaced by the process id) to write the code map
    to as a perf map. ``stdin``/``stdout``/``stderr`` are passed to
    :class:`subprocess.Popen` (default: profkit's own, untouched). Raises :class:`~profkit.errors.UsageError` before starting anything
    when the assembly or the host is unusable.
    """
    settings = settings or Settings()
    check_assembly(assembly)
    base_env = dict(os.environ if environ is None else environ)
    host = find_host(dotnet, base_env)
    with tempfile.TemporaryDirectory(prefix="profkit-clr-") as tmp:
        raw = os.path.join(tmp, "result.txt")
        env = base_env | profiler_environment(settings, output=raw, events=events)
        # Ctrl-C reaches the program through the terminal, a SIGTERM to profkit alone is
        # passed on: it ends as it would (CoreCLR runs its exit handlers and the profiler
        # writes its result); profkit then saves and ends the same way.
        with run_child(
            [host.path, assembly, *args], env=env, stdin=stdin, stdout=stdout, stderr=stderr
        ) as child:
            ended = child.wait()
        outcome = DotnetOutcome(status=ended.status, host=host, signal=ended.died_of, ended=ended)
        if not os.path.exists(raw):
            outcome.refused = _refusal(raw + ".refused")
            outcome.problem = (
                outcome.refused or "the profiler wrote no result (was the process killed?)"
            )
            return outcome
        try:
            outcome.result = load_result(raw)
        except (FormatError, UsageError) as exc:  # never the program's status lost for it
            outcome.problem = f"the profiler's result is unusable: {exc}"
            return outcome
    result = outcome.result
    outcome.profile = to_profile(
        result,
        {
            "argv": [assembly, *args],
            "dotnet": host.path,
            "dotnet_source": host.source,
            "exit_status": outcome.status,
            "settings": settings.as_dict(),
        },
    )
    if result.lost:
        outcome.notes.append(
            f"{result.lost} call events were lost (a thread's buffer was full); "
            "PROFKIT_CLR_BUFFER raises the per-thread buffer"
        )
    if perf_map:
        from profkit.formats.perfmap.perfpid import PerfMap, save_perf_map

        path = perf_map.replace("{pid}", str(result.pid))
        save_perf_map(PerfMap.from_entries(perf_map_entries(result)), path)
        outcome.perf_map = path
    return outcome


def _refusal(path: str) -> str | None:
    """The line the profiler left when the runtime refused it at Initialize, if it did."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.readline(1000).strip() or None
    except OSError:
        return None
