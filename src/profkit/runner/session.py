"""One ``profkit run``: choose, prepare, run, save, report — for any kind of target.

:func:`run` is what the CLI calls. It never prints itself: every line for the user goes
through the ``say`` function it is given (the CLI passes stderr). It returns a
:class:`Result`; ending the process the way the program ended (its status, or death by
its signal) is the caller's business.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator

from profkit._atomic import refuse_input_as_output
from profkit._record import record
from profkit.engine.contract import Engine, Finished, Job, Outcome, Running, Target
from profkit.errors import UsageError
from profkit.export.destination import Destination
from profkit.runner import output
from profkit.runner.choice import choose
from profkit.runner.outcome import report_exception
from profkit.settings import Settings

TYPE_CHECKING = False  # typing's, without importing typing at run time (profkit run's start-up)
if TYPE_CHECKING:
    from profkit.runner.exits import ExitGuard

#: Status of a run whose program succeeded but whose profile could not be written.
EXIT_NOT_SAVED = 2


@record(frozen=True)
class Result:
    """How a run ended: the program's :class:`Outcome`, where the profile went."""

    outcome: Outcome
    path: str | None  #: the profile file (None in a forked child of the program)
    save_error: str | None = None
    forked_child: bool = False

    @property
    def status(self) -> int:
        """The exit status ``profkit run`` reports: the program's, unless it succeeded and
        its profile was lost (then :data:`EXIT_NOT_SAVED`)."""
        if self.save_error is not None and self.outcome.status == 0:
            return EXIT_NOT_SAVED
        return self.outcome.status


def run(target: Target, settings: Settings, say: Callable[[str], None]) -> Result:
    """Run ``target`` under the profiler ``settings`` choose; save and report the profile."""
    session = Run(target, settings, say)
    running = session.start()
    ended: BaseException | None = None
    if running is not None:
        try:
            running.execute()
        except BaseException as exc:
            ended = exc
    return session.finish(ended)


@contextlib.contextmanager
def _no_collections() -> Iterator[None]:
    """The garbage collector off while the profile is saved and printed, as the program
    left it afterwards: that work allocates thousands of objects (the tree's shown nodes,
    names, lines), and each collection they set off walks the program's whole heap (issue
    #26; the profile's build does the same, elt/profiler.py). Deferred, not skipped: what
    is garbage then is collected later, at the latest at exit."""
    import gc

    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class Run:
    """One run in two halves around the program's main code.

    :meth:`start` checks, prepares and starts everything; for an in-process engine it
    returns the :class:`~profkit.engine.contract.Running` whose code the caller executes
    (``profkit run`` does so in its own shallowest frame), else the engine has already run
    the target and it returns None. :meth:`finish` (always called, with what the main code
    raised) stops, saves and reports.
    """

    def __init__(self, target: Target, settings: Settings, say: Callable[[str], None]) -> None:
        self.target = target
        self.say = say
        check_sinks(settings)
        if settings.mode != "trace" and (settings.udp or settings.stream or settings.timeline):
            say("profkit: note: --udp, --stream and --timeline record calls: trace mode only\n")
        # Decided once, here: children inherit the format by name, not by file ending.
        self.destination = Destination.decide(settings.output, settings.format, target.label)
        self.path = self.destination.path
        self.absolute = self.destination.file
        self.format = self.destination.format.name
        self.settings = settings.replace(output=self.path, format=self.format)
        self._finished: Finished | None = None
        self.engine: Engine | None = None
        self._environment = contextlib.ExitStack()
        self.started = 0.0
        self._guard: ExitGuard | None = None
        #: the profile was saved before an os.exec*/os._exit (runner/exits.py)
        self._saved_before: str | None = None

    def start(self) -> Running | None:
        """Choose and prepare the engine, refuse overwriting an input, start the run."""
        settings, target, say = self.settings, self.target, self.say
        choice, engine = choose(target, settings, say)
        inputs = engine.prepare(Job(target, settings, choice, say, self.destination))
        refuse_overwrite(self.path, settings.stream, inputs)
        # Children write next to our file: if that directory is not writable, each would
        # print its own failure; profile none of them, and say it once, at the end.
        out_dir = os.path.dirname(self.absolute)
        if not (os.path.isdir(out_dir) and os.access(out_dir, os.W_OK)):
            settings = self.settings = settings.replace(subprocesses=False)
        job = Job(target, settings, choice, say, self.destination)
        self.engine = engine
        self.started = time.time()
        if settings.subprocesses and choice.profiler:
            from profkit.runner import children

            variables = children.child_environment(settings, self.path, choice.profiler)
            self._environment.enter_context(children.environment(variables))
        try:
            if engine.in_process:
                # Before recording starts (not profiled): an os.exec*/os._exit saves first.
                from profkit.runner.exits import ExitGuard

                self._guard = ExitGuard(self._save_now, say)
                self._guard.install()
                return engine.begin(job)
            self._finished = engine.run(job)
            return None
        except BaseException:
            if self._guard is not None:
                self._guard.uninstall()
            self._environment.close()
            raise

    def finish(self, ended: BaseException | None) -> Result:
        """Stop (if the caller executed the code), save, report; how the run ended."""
        try:
            finished = self._finished
            if finished is None:
                assert self.engine is not None  # start() returned a Running
                finished = self.engine.end(ended)
        finally:
            if self._guard is not None:  # after recording stopped: not profiled
                self._guard.uninstall()
            self._environment.close()
            if self.settings.stream and self.settings.stream != "stderr":
                from profkit import _streamfile as streamfile

                streamfile.discard()  # opened at the check, and no sink took it
        if finished.forked_child:
            return Result(finished.outcome, None, forked_child=True)
        if self._saved_before is not None:  # the exec failed: the program went on
            self.say(
                f"profkit: note: the program's {self._saved_before} call failed after its "
                f"profile was saved; what it did afterwards was not recorded\n"
            )
            return Result(finished.outcome, self.path)
        return self._report(finished)

    def _save_now(self, how: str) -> None:
        """Save and report the profile before ``how`` (``os.execv``, ``os._exit``) ends this
        image without returning (:mod:`profkit.runner.exits`)."""
        assert self.engine is not None  # the guard is installed after the engine is chosen
        profile = self.engine.stop_now()
        if profile is None:
            return
        self._saved_before = how
        self._report(Finished(Outcome(0), profile))
        if how == "os._exit":
            return
        if self.settings.subprocesses:
            from profkit.export.destination import PID, child_template

            follow = child_template(self.path).replace(PID, str(os.getpid()))
            self.say(
                f"profkit: the program replaced itself ({how}): the new image, if a Python "
                f"program, writes its profile to {follow}\n"
            )
        else:
            self.say(
                f"profkit: the program replaced itself ({how}); the new image is not profiled\n"
            )

    def _report(self, finished: Finished) -> Result:
        settings, say, path = self.settings, self.say, self.path
        profile = finished.profile
        save_error = "no profile was recorded" if profile is None else None
        # recording stopped (engine.end): nothing of ours here is the program's profile
        with output.ordinary_recursion_limit(), _no_collections():
            # First: the profile matters more than the messages. Absolute, as decided at
            # the start, in case the program changed directory.
            if profile is not None:
                save_error = self.destination.save(profile)
            report_exception(finished.outcome)
            note = self.engine.hook_note() if self.engine is not None else None
            if note:
                say(note)
            if profile is not None and settings.tree:
                with contextlib.suppress(OSError):  # no file to import the report from
                    say(output.render(profile, output.stderr()))
        if (
            profile is not None
            and settings.prefixes
            and not any(t.root.children for t in profile.threads)
            and (self.engine is None or self.engine.records_calls)  # (.NET --perf-map)
        ):
            hint = " (a script's own code is __main__)" if self.target.kind == "script" else ""
            prefixes = ",".join(settings.prefixes)
            say(f"profkit: note: no function matched --prefix {prefixes}{hint}\n")
        if save_error and finished.unprofiled is not None:
            pass  # the engine's one line said why the program ran unprofiled
        elif save_error:
            say(
                f"profkit: error: cannot write profile {path}: {save_error} "
                f"(the program {_ending(finished.outcome)})\n"
            )
        else:
            say(self.destination.announcement(profile.mode if profile is not None else ""))
        if settings.subprocesses:
            from profkit.runner import children

            found = children.child_files(self.absolute, self.started)
            if found:
                shown = ", ".join(found[:3]) + (", …" if len(found) > 3 else "")
                say(f"profkit: {len(found)} child process profile(s): {shown}\n")
        return Result(finished.outcome, path, save_error)


def _ending(outcome: Outcome) -> str:
    """How the program ended, for the line saying its profile was lost."""
    if outcome.terminated:
        return "was terminated by SIGTERM"
    if outcome.interrupted:
        return "was interrupted (SIGINT)"
    return f"exited with status {outcome.status}"


def check_sinks(settings: Settings) -> None:
    """Refuse an unusable --udp/--stream before the program starts, not inside the profiler."""
    if settings.udp is not None:
        import socket

        host, port = settings.udp
        try:
            socket.getaddrinfo(host, port, type=socket.SOCK_DGRAM)
        except OSError as exc:
            raise UsageError(f"--udp {host}:{port}: cannot resolve {host!r}: {exc}") from None


def refuse_overwrite(path: str, stream: str | None, inputs: tuple[str, ...]) -> None:
    """Refuse an output (profile or ``--stream`` file) that is the program or another input,
    or the other output, before anything runs: ``run -o app.py app.py`` used to replace
    the script with JSON."""
    outputs = [("-o", path)] + ([("--stream", stream)] if stream and stream != "stderr" else [])
    for flag, out in outputs:
        clash = refuse_input_as_output(out, list(inputs)) or _same_name(out, inputs)
        if clash is not None:
            raise UsageError(
                f"{flag} {out} is the program being run ({clash}); inputs are never "
                "modified, choose another output"
            )
    if stream and stream != "stderr" and _same_path(stream, path):
        raise UsageError(f"--stream {stream} and -o {path} are the same file")
    if stream and stream != "stderr":
        _check_stream(stream)


def _same_name(out: str, inputs: tuple[str, ...]) -> str | None:
    return next((p for p in inputs if _same_path(out, p)), None)


def _same_path(a: str, b: str) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)


def _check_stream(stream: str) -> None:
    """Open the ``--stream`` file for the profiler (created or truncated), once: its sink
    takes this file, so a symlink swapped in later is never followed (``_streamfile.py``).
    After the overwrite checks, never before (opening it truncates it)."""
    from profkit import _streamfile as streamfile

    try:
        streamfile.prepare(stream)
    except OSError as exc:
        raise UsageError(f"--stream {stream}: {exc.strerror or exc}") from None
