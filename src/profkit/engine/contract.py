"""What an engine is given and hands back, and the hooks the runner calls on it.

An **engine** runs one kind of target under one kind of profiler. The runner
(:mod:`profkit.runner.session`) builds a :class:`Job`, asks the engine whether it can run
here (:meth:`Engine.unavailable`), lets it check the target (:meth:`Engine.prepare`), then
either

* **in process** (``in_process`` True: the program runs in this interpreter): calls
  :meth:`Engine.begin`, executes the returned :class:`Running` in its own frame, calls
  :meth:`Engine.end`; may call :meth:`Engine.stop_now` when the program replaces itself
  (``os.exec*``, ``os._exit``), and :meth:`Engine.hook_note` after the end; or
* **as a child** (``in_process`` False): calls :meth:`Engine.run`, which runs the target
  to its end (engines of this kind subclass :class:`ChildEngine`, which answers the
  in-process hooks, and usually run their child through :mod:`profkit.engine.child`).

Either way the engine hands back a :class:`Finished` (the :class:`Outcome` and the
profile); saving, the tree, the program's status are the runner's.

Plugging in an engine is one row of :data:`profkit.runner.choice.CHOICES` naming a class
that satisfies :class:`Engine`::

    class DotnetSampleEngine(ChildEngine):
        def unavailable(self, job: Job) -> str | None: ...   # no host? say why
        def prepare(self, job: Job) -> tuple[str, ...]: ...  # the files the run reads
        def run(self, job: Job) -> Finished: ...             # child.run_child(...) + sampling
"""

from __future__ import annotations

# signal.py's enums cost ~3 M instructions at import (every run's start-up): the C module's ints.
import _signal  # type: ignore[import-not-found]
import importlib
from collections.abc import Callable
from types import CodeType

from profkit._record import record
from profkit.calltree.model import CallProfile
from profkit.export.destination import Destination
from profkit.settings import Settings

TYPE_CHECKING = False  # typing's, without importing typing at run time (profkit run's start-up)
if TYPE_CHECKING:
    from typing import Any, Protocol
else:
    Protocol = object  # the protocols below are for type checkers only


class Target(Protocol):
    """What to run (:class:`profkit.runner.python.Program`, :class:`profkit.clr.engine.DotnetTarget`)."""

    @property
    def kind(self) -> str:
        """``script``, ``module``, ``code`` (Python); an engine's own kinds (``dotnet``...)."""
        ...

    @property
    def label(self) -> str:
        """A short, file-name-safe name: default output names and messages."""
        ...


#: Target kinds of a Python program (``python script.py`` / ``-m module`` / ``-c code``).
PYTHON_KINDS = ("script", "module", "code")


def looks_like_assembly_name(path: str) -> bool:
    """Whether ``profkit run`` should treat ``path`` as a .NET program (by its suffix).

    Here, not in :mod:`profkit.clr.assembly` (which re-exports it): every ``profkit run``
    asks, and loading the ``profkit.clr`` package for it cost ~1 M instructions of each
    start-up (issue #26)."""
    return path.lower().endswith((".dll", ".exe"))


class PythonProgram(Target, Protocol):
    """A Python target (:class:`profkit.runner.python.Program`), as engines that run it
    outside this interpreter see it: ``kind`` is one of :data:`PYTHON_KINDS`."""

    @property
    def target(self) -> str:
        """The script's path, the module's name, or the code."""
        ...

    @property
    def args(self) -> tuple[str, ...]:
        """``sys.argv[1:]`` of the program."""
        ...

    def prepare(self) -> object:
        """Find and compile it (a ``UsageError`` when it cannot be run)."""
        ...


def python_program(target: Target) -> PythonProgram:
    """``target`` as a :class:`PythonProgram` (a ``TypeError`` if it is another kind: a
    row of the table sent it to the wrong engine)."""
    if target.kind not in PYTHON_KINDS:
        raise TypeError(f"not a Python program: a {target.kind} target")
    return target  # type: ignore[return-value]  # the kind says so


@record(frozen=True)
class Outcome:
    """How the program ended: ``status`` is what ``python``'s exit status would read as in a
    shell (``128 + signal`` for a signal death; see :func:`profkit.runner.outcome.exit_signal`)."""

    status: int
    exception: BaseException | None = None  #: an uncaught exception (not SystemExit)
    system_exit: SystemExit | None = None
    interrupted: bool = False  #: Ctrl-C (KeyboardInterrupt) ended it
    terminated: bool = False  #: SIGTERM ended it
    #: the signal a program run as a child process died of (SIGKILL, SIGSEGV, ...)
    died_of: int | None = None


def outcome_of_returncode(returncode: int) -> Outcome:
    """The :class:`Outcome` of a program run as a child process (``Popen.returncode``:
    negative when a signal ended it), for engines that run their target outside."""
    if returncode >= 0:
        return Outcome(returncode)
    sig = -returncode
    return Outcome(
        128 + sig,
        interrupted=sig == _signal.SIGINT,
        terminated=sig == _signal.SIGTERM,
        died_of=sig,
    )


@record(frozen=True)
class ProfilerChoice:
    """A row of :data:`profkit.runner.choice.CHOICES`: which engine and profiler serve a mode."""

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


@record(frozen=True)
class Job:
    """One run: the target, the settings (``output`` already decided), the chosen row,
    where the engine may say something (profkit's stderr lines), and where the profile
    goes (None only while the runner is still choosing an engine): an engine that saves
    profiles itself (its target's child processes) saves them through
    ``destination.child(pid)``."""

    target: Target
    settings: Settings
    choice: ProfilerChoice
    say: Callable[[str], None]
    destination: Destination | None = None


class Finished:
    """What an engine hands back: how the program ended, the profile, and, for
    ``argv`` shown by reports, anything the engine wants recorded in the metadata.

    A plain class (a fresh ``metadata`` dict each): see :mod:`profkit._record` for why
    nothing on ``profkit run``'s start-up path is a dataclass."""

    __slots__ = ("forked_child", "metadata", "outcome", "profile", "unprofiled")

    def __init__(
        self,
        outcome: Outcome,
        profile: CallProfile | None,
        forked_child: bool = False,
        metadata: dict[str, object] | None = None,
        unprofiled: str | None = None,
    ) -> None:
        self.outcome = outcome
        self.profile = profile
        #: why the program ran unprofiled, when the engine (or the profiler in the program)
        #: has said it in its one line already: the runner adds no line of its own
        self.unprofiled = unprofiled
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


class Running(Protocol):
    """An in-process program between :meth:`Engine.begin` and :meth:`Engine.end`: the caller
    executes :attr:`code` in :attr:`globals` in its own frame (or ``runpy.run_path`` of
    :attr:`path` when there is no code: a directory or zip app), after
    :meth:`import_package`, or calls :meth:`execute`, which does both."""

    code: CodeType | None
    path: str
    globals: dict[str, Any]

    def import_package(self) -> None:
        """``-m pkg.mod``: import ``pkg`` (its code is the program's), as ``python -m``
        does first; may change :attr:`code` and :attr:`globals`. No-op otherwise."""
        ...

    def execute(self) -> None: ...


class Engine(Protocol):
    """Runs one kind of target under one kind of profiler (see the module docstring)."""

    @property
    def in_process(self) -> bool:
        """True: the runner calls :meth:`begin`/:meth:`end` (never :meth:`run`) and may call
        :meth:`stop_now`; False: it calls :meth:`run` only."""
        ...

    @property
    def records_calls(self) -> bool:
        """False when the run, by design, recorded no calls (.NET ``--perf-map``, events
        without calls): an empty tree then says nothing of ``--prefix``. Read after the run."""
        ...

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

    def begin(self, job: Job) -> Running:
        """In process: start recording and hand back the program's code to execute."""
        ...

    def end(self, ended: BaseException | None) -> Finished:
        """In process: after the program's main code (``ended``: what it raised)."""
        ...

    def stop_now(self) -> CallProfile | None:
        """In process: stop recording at once, the profile so far (None: nothing running);
        the program is about to replace itself or leave without returning."""
        ...

    def hook_note(self) -> str | None:
        """A line for the end of the run about the profiler's hook (the program took it
        over), or None."""
        ...


class ChildEngine:
    """The base of engines whose target runs as a child process: they implement
    :meth:`Engine.unavailable`, :meth:`Engine.prepare` and :meth:`Engine.run`; the
    in-process hooks are answered here, once."""

    in_process = False
    records_calls = True

    def begin(self, job: Job) -> Running:
        raise TypeError(f"{type(self).__name__} runs its target as a child: call run()")

    def end(self, ended: BaseException | None) -> Finished:
        raise TypeError(f"{type(self).__name__} runs its target as a child: call run()")

    def stop_now(self) -> CallProfile | None:
        return None  # the program is another process: it saves nothing of ours when it execs

    def hook_note(self) -> str | None:
        return None
