"""The .NET engine of ``profkit run`` (a row of :data:`profkit.runner.choice.CHOICES`).

``profkit run app.dll ARGS`` and ``profkit clr run app.dll ARGS`` both come here through
:func:`profkit.runner.session.run`, which does everything after the engine returns —
saving ``-o``, the tree, refusing to overwrite an input, ending with the program's status.
"""

from __future__ import annotations

from profkit._record import record
from profkit.clr.assembly import check_assembly
from profkit.engine.contract import ChildEngine, Finished, Job
from profkit.export.destination import program_label


@record(frozen=True)
class DotnetTarget:
    """A .NET assembly to run with ``dotnet``, and how."""

    assembly: str
    args: tuple[str, ...] = ()
    dotnet: str | None = None  #: ``--dotnet``: the host (else found; see profkit.clr.host)
    perf_map: str | None = None  #: ``--perf-map``: where to write it (``{pid}`` allowed)
    events: tuple[str, ...] | None = None  #: ``--clr-events``: None = the profiler's default
    kind: str = "dotnet"

    @property
    def label(self) -> str:
        return program_label(self.assembly)


def checked_target(
    assembly: str,
    args: tuple[str, ...] = (),
    dotnet: str | None = None,
    perf_map: str | None = None,
    events: tuple[str, ...] | None = None,
) -> DotnetTarget:
    """A target whose assembly is known to be one: a bad input is the user's first problem
    to hear of, before whether a .NET runtime is installed (UsageError naming the file)."""
    check_assembly(assembly)
    return DotnetTarget(assembly, args, dotnet, perf_map, events)


def target_of(job: Job) -> DotnetTarget:
    """The job's .NET target (every .NET engine's job has one)."""
    target = job.target
    assert isinstance(target, DotnetTarget)
    return target


_target = target_of


def host_unavailable(job: Job) -> str | None:
    """Why no dotnet host can run the job's target (one line), else None: the same answer
    for every .NET engine, traced or sampled."""
    from profkit.clr.host import find_host
    from profkit.errors import UsageError

    try:
        find_host(target_of(job).dotnet)
    except UsageError as exc:
        return str(exc)
    return None


def no_calls_note(target: DotnetTarget) -> str | None:
    """Why the profile of ``target`` has no call tree by design (the events chosen record no
    calls), or None: the line said instead of blaming ``--prefix`` for an empty profile."""
    if target.events is None or "calls" in target.events:
        return None
    if target.perf_map:
        return (
            "profkit: note: --perf-map runs without call hooks (they keep the runtime from "
            "using precompiled code, which the map is for): the profile holds the run's "
            "events, no call tree; run without --perf-map for calls\n"
        )
    events = ",".join(target.events) or "(none)"
    return f"profkit: note: --clr-events {events} records no calls: the profile has no call tree\n"


class DotnetEngine(ChildEngine):
    """Runs a :class:`DotnetTarget` under libprofkit_clr.so (trace mode)."""

    #: whether the run hooked calls: False when the events chosen leave them out, so the
    #: runner does not take an empty profile for a ``--prefix`` that matched nothing
    records_calls = True
    _note: str | None = None

    def hook_note(self) -> str | None:
        return self._note

    def unavailable(self, job: Job) -> str | None:
        return host_unavailable(job)

    def prepare(self, job: Job) -> tuple[str, ...]:
        from profkit.clr.environment import library_path

        target = _target(job)
        check_assembly(target.assembly)
        library_path()  # built? (a UsageError saying why not)
        return (target.assembly,)

    def run(self, job: Job) -> Finished:
        from profkit.clr.launch import run_dotnet

        target = _target(job)
        self._note = no_calls_note(target)
        self.records_calls = self._note is None
        outcome = run_dotnet(
            target.assembly,
            target.args,
            settings=job.settings,
            dotnet=target.dotnet,
            events=target.events,
            perf_map=target.perf_map,
        )
        for note in outcome.notes:
            job.say(f"profkit: note: {note}\n")
        if outcome.profile is None and outcome.refused is None:  # a refusal: said already
            job.say(f"profkit: error: {outcome.problem}\n")
        if outcome.perf_map:
            job.say(f"profkit: perf map saved to {outcome.perf_map}\n")
        return Finished(outcome.ended, outcome.profile, unprofiled=outcome.refused)
