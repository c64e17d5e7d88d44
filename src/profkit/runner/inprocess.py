"""The in-process engine: a Python program run in this interpreter under a profkit profiler.

The program runs as ``python`` would run it (:mod:`profkit.runner.python`); the profiler
named by the chosen row (:mod:`profkit.runner.choice`) is attached just before the program's
first line and detached just after its end, so profkit's own start-up and saving are never
in the profile.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

from profkit.api import ProfilerCallback
from profkit.calltree.model import CallProfile
from profkit.engine.contract import Finished, Job
from profkit.runner.python import Prepared, Program, Running
from profkit.settings import IN_PROCESS_CLOCKS

TYPE_CHECKING = False  # typing's, without importing typing at run time (profkit run's start-up)
if not TYPE_CHECKING:  # typing's run-time versions, as far as this module uses them
    Protocol = object

    def cast(kind: object, value: object) -> object:
        return value

else:
    from typing import Any, Protocol, cast

    from profkit.runner.hookguard import HookGuard


class InProcessProfiler(Protocol):
    """What the engine needs of the profiler it attaches (the ELT and sampling profilers):
    built with ``factory(settings, standalone=False, paused=True, main_module=...,
    internal_files=...)``, started after ``attach`` returns, quieted, stopped, read."""

    profile: CallProfile | None
    notes: list[str]  #: lines for the end of the run (e.g. a C part that is missing)

    def start_events(self) -> None: ...
    def stop_events(self) -> None: ...
    def quiet_this_thread(self) -> None: ...
    def build_profile(self) -> CallProfile: ...


class InProcessEngine:
    """:class:`~profkit.engine.contract.Engine` for ``script``, ``module`` and ``code``:
    the program runs in this interpreter (``begin``/``end`` around its main code)."""

    in_process = True
    records_calls = True

    def __init__(self) -> None:
        self._prepared: Prepared | None = None
        self._profiler: InProcessProfiler | None = None
        self._program: Program | None = None
        self._running: Running | None = None
        self._parent_pid = 0
        self._stopped = False  #: recording stopped early (stop_now: exec or _exit)
        self._guard: HookGuard | None = None
        #: profkit.collect's current_session and detach, for end()
        self._collect: tuple[Callable[[], Any], Callable[[], None]] = (lambda: None, lambda: None)

    def unavailable(self, job: Job) -> str | None:
        clock = job.settings.sample_clock
        if job.settings.mode == "sample" and clock not in IN_PROCESS_CLOCKS:
            return f"the in-process sampler cannot measure --sample-clock {clock} (wall, cpu)"
        backend = _backend()
        if backend != "auto":
            from profkit.api import EventMask
            from profkit.collect.backends import capabilities, unavailable

            why = unavailable(backend)
            if why is not None:
                return f"PROFKIT_BACKEND={backend}: {why}"
            c_calls = job.settings.mode == "trace" and job.settings.c_calls
            if c_calls and not capabilities(backend).events & EventMask.CODE_TRANSITIONS:
                # (else the profiler's initialize fails, and the program runs unprofiled)
                return f"PROFKIT_BACKEND={backend}: it cannot see C calls (add --no-c-calls)"
        return None

    def prepare(self, job: Job) -> tuple[str, ...]:
        program = job.target
        assert isinstance(program, Program)
        self._prepared = program.prepare()
        if program.kind == "script":
            return (program.target,)
        origin = self._prepared.globals.get("__file__")
        return (origin,) if isinstance(origin, str) else ()

    def run(self, job: Job) -> Finished:
        running = self.begin(job)
        ended: BaseException | None = None
        try:
            running.execute()
        except BaseException as exc:
            ended = exc
        return self.end(ended)

    def begin(self, job: Job) -> Running:
        """Build and attach the profiler, set the program up; the code to execute.

        Split from :meth:`end` so that ``profkit run`` can execute the program's code in its
        own shallowest frame (see :class:`~profkit.runner.python.Running`).
        """
        program = job.target
        assert isinstance(program, Program) and self._prepared is not None
        prepared = self._prepared
        settings = job.settings
        launcher = sys.argv[0] if sys.argv else ""
        main_module = None
        spec = prepared.globals.get("__spec__")
        if spec is not None and spec.origin:
            main_module = (spec.origin, spec.name)  # -m: name its code after the module
        elif program.kind == "script" and prepared.code is not None:
            # A script's code is __main__'s, always: the collector's file -> module lookup
            # may name it after the file's stem or __main__ depending on when it first saw it.
            main_module = (prepared.code.co_filename, "__main__")
        factory = cast("Callable[..., InProcessProfiler]", job.choice.load_profiler())
        profiler = factory(
            settings,
            standalone=False,
            paused=True,
            main_module=main_module,
            # the `profkit` console script: the stack sampler sees it under the program
            internal_files=(launcher, os.path.abspath(launcher)) if launcher else (),
        )
        self._profiler = profiler
        self._program = program
        self._parent_pid = os.getpid()

        from profkit.collect import attach, current_session, detach
        from profkit.runner.hookguard import HookGuard

        self._collect = (current_session, detach)
        guard = self._guard = HookGuard()
        handover = None
        if settings.subprocesses:
            # A forked child attaches its own profiler through the start-up hook, which
            # this process never needs: loaded here, once and unrecorded, rather than in
            # every child (compiled anew where there are no bytecode files), and what it
            # would build there prepared, for the child to go on with this profiler reset
            # in place instead (issue 22, item 13; activation.Handover).
            from profkit.collect import startup
            from profkit.runner import activation

            try:
                handover = activation.handover(profiler, os.environ)
            except Exception:  # a child attaching anew reports it, as it always did
                handover = None

        def start() -> None:
            if current_session() is not None:
                # Started by a profiled parent: our own start-up hook attached a profiler
                # to this (profkit) process; ours replaces it. What it recorded is profkit's
                # own start-up: it must not save (or print) that as a profile.
                from profkit.runner import activation

                activation.disown()
                detach()
            attached = attach(
                cast("ProfilerCallback", profiler),
                _backend(),  # as children read it (collect/startup.py)
                sample_interval=settings.interval_ns / 1e9,
                sample_clock=settings.sample_clock,
                native=settings.native != "off",
            )
            if handover is not None and attached.active:
                startup.resume_as(attached, handover.ready, handover.forked)
            guard.arm(sys.getprofile())  # 3.11: the profile function to keep (3.12+: None)
            profiler.start_events()

        guard.install()
        try:
            self._running = program.begin(prepared, start)
        except BaseException:
            guard.uninstall()
            raise
        return self._running

    def hook_note(self) -> str | None:
        """Lines for the end of the run: the program took profkit's profile function over
        (:mod:`profkit.runner.hookguard`), the profiler's own notes; else None."""
        guard = None if self._guard is None else self._guard.note()
        notes = [guard] if guard else []
        if self._profiler is not None:
            notes += self._profiler.notes
        return "".join(notes) or None

    def end(self, ended: BaseException | None) -> Finished:
        """After the program's main code: stop, detach, and the profile."""
        # Bound in begin(): an import statement here would run while recording still goes
        # on (importlib's _handle_fromlist, hasattr, isinstance were in every profile).
        current_session, detach = self._collect

        profiler = self._profiler
        parent_pid = self._parent_pid
        assert profiler is not None and self._running is not None and self._program is not None
        running = self._running

        def ours() -> InProcessProfiler:
            """The profiler recording this process: in a forked child returning through
            this code, the fresh one the collector attached at the fork, not our copy."""
            if os.getpid() != parent_pid:
                session = current_session()
                if session is not None and hasattr(session.profiler, "quiet_this_thread"):
                    return cast(InProcessProfiler, session.profiler)
            return profiler

        def stop() -> None:
            """Stop recording, then detach: profkit's own detach work stays out of the profile."""
            guard = self._guard
            if guard is not None:
                guard.disarm()  # profkit removing its own hook is not the program's doing
            if self._stopped and os.getpid() == parent_pid:
                return  # stopped already, before an exec that failed
            ours().stop_events()
            detach()

        try:
            outcome = running.end(ended, stop, main_done=lambda: ours().quiet_this_thread())
        finally:
            if self._guard is not None:
                self._guard.uninstall()
        if os.getpid() != parent_pid:
            return Finished(outcome, None, forked_child=True)
        return Finished(outcome, self._profile())

    def stop_now(self) -> CallProfile | None:
        """Stop recording at once and build the profile: the program is about to replace
        itself (``os.exec*``) or leave through ``os._exit`` (:mod:`profkit.runner.exits`).
        No waiting for its threads: neither ending waits for them. None if not running."""
        profiler, running = self._profiler, self._running
        if profiler is None or running is None or self._stopped:
            return None
        if os.getpid() != self._parent_pid:
            return None
        self._stopped = True
        if self._guard is not None:
            self._guard.disarm()
        _, detach = self._collect
        limit = running.recursion_limit
        if sys.getrecursionlimit() < limit:  # as Running.end: profkit's work needs depth
            sys.setrecursionlimit(limit)
        profiler.stop_events()
        detach()
        return self._profile()

    def _profile(self) -> CallProfile:
        profiler, program = self._profiler, self._program
        assert profiler is not None and program is not None
        profile = profiler.profile if profiler.profile is not None else profiler.build_profile()
        if program.kind == "code":
            profile.metadata["argv"] = ["-c", *program.args]
        return profile


def _backend() -> str:
    """The collector backend ``PROFKIT_BACKEND`` forces, or ``auto`` (``collect.select``)."""
    from profkit.settings import read

    return str(read(os.environ, "backend") or "auto")
