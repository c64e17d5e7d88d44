"""``profkit run --mode sample`` from outside: the program runs as a child, sampled.

An :class:`~profkit.engine.contract.Engine` (a row of :data:`profkit.runner.choice.CHOICES`
before the in-process sampler's): the program is started as ``python script.py args``
(``-m module``, ``-c code``) with profkit's own interpreter, and read from this process
by :func:`profkit.sampler.sample_command`. Nothing of profkit runs inside it, so the
sampler never waits for the GIL (the in-process sampler thread sees ~160 samples/s at
1 kHz and misattributes tight loops), and the program's threads, stdin, stdout, exit
status and signals are its own.

Where reading another process is not allowed (ptrace scope, a container without the
capability, not Linux), :meth:`OutOfProcessEngine.unavailable` says why before anything
runs, and the runner falls back to the in-process sampler, saying so on stderr.
``PROFKIT_SAMPLER=in-process`` asks for the in-process sampler outright.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

from profkit.api.names import is_profkit_module, prefix_matches
from profkit.engine.contract import (
    ChildEngine,
    Finished,
    Job,
    PythonProgram,
    outcome_of_returncode,
    python_program,
)
from profkit.export.destination import Destination
from profkit.sampler.command import sample_command
from profkit.sampler.reader import CodeInfo
from profkit.sampler.session import SamplerOptions
from profkit.settings import SAMPLER_IN_PROCESS as IN_PROCESS
from profkit.settings import read as read_setting

_probe_result: list[str | None] = []


def probe() -> str | None:
    """None when this process may read a child's memory, else why not (checked once)."""
    if _probe_result:
        return _probe_result[0]
    reason: str | None = None
    if not sys.platform.startswith("linux"):
        reason = "out-of-process sampling reads /proc and process_vm_readv: Linux only"
    else:
        reason = _probe_child()
    _probe_result.append(reason)
    return reason


def _probe_child() -> str | None:
    from profkit.sampler.errors import AttachError
    from profkit.sampler.memory import Memory
    from profkit.sampler.procinfo import read_maps

    try:
        child = subprocess.Popen(
            [sys.executable, "-c", "import sys; sys.stdin.read()"],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    except OSError as exc:
        return f"cannot start a probe process: {exc}"
    try:
        read_maps(child.pid)  # permission to see its mappings
        with open(f"/proc/{child.pid}/maps") as f:
            first = f.readline()  # any mapping: right after exec only the stack may be there
        Memory(child.pid).read(int(first.split("-", 1)[0], 16), 8)
    except AttachError as exc:
        return str(exc)
    except (OSError, ValueError) as exc:
        return f"cannot read the probe process's mappings: {exc}"
    finally:
        child.kill()
        child.wait()
        if child.stdin is not None:
            child.stdin.close()
    return None


def child_argv(program: PythonProgram) -> list[str]:
    """The command ``python`` would be run as, with profkit's own interpreter."""
    flags = ["-P"] if sys.flags.safe_path else []
    if program.kind == "script":
        return [sys.executable, *flags, program.target, *program.args]
    if program.kind == "module":
        return [sys.executable, *flags, "-m", program.target, *program.args]
    return [sys.executable, *flags, "-c", program.target, *program.args]


def _save_children(children: dict[int, Any], destination: Destination, job: Job) -> None:
    """Each child's profile as ``<stem>.<pid><suffix>`` in the run's format (as children
    profiled in-process save theirs), where ``profkit run`` finds and lists them."""
    for pid, profile in children.items():
        where = destination.child(pid)
        error = where.save(profile)
        if error:
            job.say(f"profkit: error: cannot write child profile {where.path}: {error}\n")


class OutOfProcessEngine(ChildEngine):
    """:class:`~profkit.engine.contract.Engine`: ``script``/``module``/``code`` as a child."""

    def unavailable(self, job: Job) -> str | None:
        if read_setting(os.environ, "sampler") in IN_PROCESS:
            return "PROFKIT_SAMPLER=in-process"
        reason = probe()
        if reason is not None:
            return f"cannot sample from outside here: {reason}"
        return None

    def prepare(self, job: Job) -> tuple[str, ...]:
        program = python_program(job.target)
        if program.kind == "script":
            program.prepare()  # a missing or broken script fails now, cleanly
            return (program.target,)
        if program.kind == "code":
            program.prepare()  # a syntax error fails now
            return ()
        from profkit.engine.modspec import spec_without_running

        try:
            # Not importlib's find_spec: it would run the module's packages here, in
            # profkit's process, and their prints would come out twice.
            spec = spec_without_running(program.target)
        except (ImportError, ValueError):
            spec = None
        origin = spec.origin if spec is not None else None
        return (origin,) if isinstance(origin, str) and os.path.exists(origin) else ()

    def run(self, job: Job) -> Finished:
        program = python_program(job.target)
        settings = job.settings
        options = SamplerOptions(
            rate=1e9 / max(settings.interval_ns, 1000),
            mode=settings.sample_clock,
            follow_children=settings.subprocesses,
        )
        prefixes = settings.prefixes

        def keep(info: CodeInfo) -> bool:
            if is_profkit_module(info.module):
                return False  # runpy under -m: the launcher, hidden as in-process
            return not prefixes or prefix_matches(info.module, prefixes)

        outcome = sample_command(child_argv(program), options, keep=keep, program_only=True)
        if outcome.fallback:
            job.say(f"profkit: note: the program was not sampled: {outcome.fallback}\n")
        busy = outcome.stats.busy_note() if outcome.stats is not None else ""
        if busy:
            job.say(f"profkit: note: {busy}\n")
        profile = outcome.profiles.get(outcome.pid)
        metadata: dict[str, Any] = {}
        if profile is not None:
            argv0 = {"script": program.target, "module": "-m", "code": "-c"}[program.kind]
            extra = [program.target] if program.kind == "module" else []
            profile.metadata["argv"] = [argv0, *extra, *program.args]
            profile.metadata["settings"] = settings.as_dict()
            profile.metadata["engine"] = "out-of-process"
            children = {pid: p for pid, p in outcome.profiles.items() if pid != outcome.pid}
            if children and job.destination is not None:
                _save_children(children, job.destination, job)
        return Finished(outcome_of_returncode(outcome.returncode), profile, metadata=metadata)
