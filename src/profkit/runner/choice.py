"""The one place that decides how a target is run and which profiler records it.

A **target** is what the user asked to run (a Python script, ``-m`` module or ``-c``
code today; a .NET assembly next). An **engine** runs one kind of target under one kind of
profiler and hands back how it ended and the profile it recorded. :data:`CHOICES` is the
table: ``(target kinds, mode) -> engine, profiler``; :func:`choose` is consulted once per
run, and its answer is used for the program *and* for its child processes (the choice
used to be made twice, once for each).

To plug in another kind of target or profiler, add a row (before a row it should win
over) whose engine satisfies :class:`Engine`; an engine whose :meth:`Engine.unavailable`
gives a reason is skipped with that reason noted, and the next matching row is used
(e.g. an out-of-process sampler falling back to the in-process one where reading another
process is not allowed).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Protocol

from profkit._record import record
from profkit.calltree.model import CallProfile
from profkit.errors import UsageError
from profkit.runner.outcome import Outcome
from profkit.settings import Settings

#: Target kinds run by the in-process Python engine (``python script.py`` / ``-m`` / ``-c``).
PYTHON_KINDS = ("script", "module", "code")


class Target(Protocol):
    """What to run."""

    @property
    def kind(self) -> str:
        """``script``, ``module``, ``code`` (Python); an engine's own kinds (``dotnet``...)."""
        ...

    @property
    def label(self) -> str:
        """A short, file-name-safe name: default output names and messages."""
        ...


@record(frozen=True)
class Job:
    """One run: the target, the settings (``output`` already decided), the chosen row,
    and where the engine may say something (profkit's stderr lines)."""

    target: Target
    settings: Settings
    choice: ProfilerChoice
    say: Callable[[str], None]


class Finished:
    """What an engine hands back: how the program ended, the profile, and, for
    ``argv`` shown by reports, anything the engine wants recorded in the metadata.

    A plain class (a fresh ``metadata`` dict each): see :mod:`profkit._record` for why
    nothing on ``profkit run``'s start-up path is a dataclass."""

    __slots__ = ("forked_child", "metadata", "outcome", "profile")

    def __init__(
        self,
        outcome: Outcome,
        profile: CallProfile | None,
        forked_child: bool = False,
        metadata: dict[str, object] | None = None,
    ) -> None:
        self.outcome = outcome
        self.profile = profile
        #: True in a forked child of the program that returned through profkit's code: it
        #: saved its own profile (environment activation); the caller only passes its
        #: ending on.
        self.forked_child = forked_child
        self.metadata: dict[str, object] = {} if metadata is None else metadata

    def __repr__(self) -> str:
        return (
            f"Finished(outcome={self.outcome!r}, profile={self.profile!r}, "
            f"forked_child={self.forked_child!r}, metadata={self.metadata!r})"
        )


class Engine(Protocol):
    """Runs one kind of target under one kind of profiler."""

    def unavailable(self, job: Job) -> str | None:
        """Why this engine cannot run ``job`` here (the next matching row is tried), or None."""
        ...

    def prepare(self, job: Job) -> tuple[str, ...]:
        """Find and check the target before anything is profiled (a ``UsageError`` if bad).

        Returns the files the run reads (the script, the module's file, the assembly): no
        output of the run may replace one of them.
        """
        ...

    def run(self, job: Job) -> Finished:
        """Run the target to its end, however it ends; raise only for profkit's own errors."""
        ...


@record(frozen=True)
class ProfilerChoice:
    """A row of :data:`CHOICES`."""

    mode: str  #: the ``--mode`` it serves
    kinds: tuple[str, ...]  #: the target kinds it runs
    engine: str  #: ``module:Class`` of the :class:`Engine` (imported only when chosen)
    profiler: str  #: ``PROFKIT_PROFILER`` of the in-process profiler (and of children)

    def load_engine(self) -> Engine:
        module, _, name = self.engine.partition(":")
        engine: Engine = getattr(importlib.import_module(module), name)()
        return engine

    def load_profiler(self) -> Callable[..., object]:
        module, _, name = self.profiler.partition(":")
        factory: Callable[..., object] = getattr(importlib.import_module(module), name)
        return factory


_IN_PROCESS = "profkit.runner.inprocess:InProcessEngine"

CHOICES: tuple[ProfilerChoice, ...] = (
    ProfilerChoice("trace", PYTHON_KINDS, _IN_PROCESS, "profkit.profilers.elt:EltProfiler"),
    # Sampled from outside when this machine allows reading a child's memory (no GIL bias);
    # else the in-process sampler below, with the reason on stderr.
    ProfilerChoice("sample", PYTHON_KINDS, "profkit.sampler.engine:OutOfProcessEngine", ""),
    ProfilerChoice("sample", PYTHON_KINDS, _IN_PROCESS, "profkit.profilers.elt:SamplingProfiler"),
    # Sampled allocations (bytes by stack) in-process, through the API's OBJECT_ALLOCATED.
    ProfilerChoice("memory", PYTHON_KINDS, _IN_PROCESS, "profkit.profilers.memory:MemoryProfiler"),
    ProfilerChoice("trace", ("dotnet",), "profkit.clr.engine:DotnetEngine", profiler=""),
    # Sampled from outside through the runtime's diagnostics port (EventPipe).
    ProfilerChoice("sample", ("dotnet",), "profkit.dotnet.engine:SampleEngine", profiler=""),
)


def choose(
    target: Target, settings: Settings, say: Callable[[str], None]
) -> tuple[ProfilerChoice, Engine]:
    """The first row serving ``target.kind`` and ``settings.mode`` whose engine can run."""
    reasons: list[str] = []
    for row in CHOICES:
        if row.mode != settings.mode or target.kind not in row.kinds:
            continue
        engine = row.load_engine()
        job = Job(target, settings, row, say)
        reason = engine.unavailable(job)
        if reason is None:
            for earlier in reasons:
                say(f"profkit: note: {earlier}; using {row.engine.rpartition(':')[2]}\n")
            return row, engine
        reasons.append(reason)
    why = f" ({'; '.join(reasons)})" if reasons else ""
    raise UsageError(f"--mode {settings.mode} cannot run a {target.kind} target{why}")
