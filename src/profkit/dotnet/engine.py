"""``profkit run --mode sample app.dll ARGS``: run a .NET program, sample it through EventPipe.

A row of :data:`profkit.runner.choice.CHOICES`. The program runs as ``dotnet app.dll ARGS``
with profkit's stdin, stdout and stderr and its own exit status; nothing of profkit is
loaded into it. profkit watches for its diagnostics socket (every millisecond) and starts
the session the moment the runtime listens. How much of start-up that misses: CoreCLR 3.1
opens the port during its own start-up, before the program's ``Main``, but cannot be told
to wait for a client (``DOTNET_DiagnosticPorts``' suspend mode is .NET 5+), so the time
from exec to the session's first sample (the host resolving the framework, the runtime
starting) is not seen; the profile's ``sampler.unseen_start_ns`` says how long it was.
The program's end ends the stream; what was seen is kept.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from profkit.clr.engine import host_unavailable, target_of
from profkit.dotnet.ipc import DiagnosticsError, find_socket
from profkit.dotnet.session import LiveSession
from profkit.engine.child import Child, run_child
from profkit.engine.contract import ChildEngine, Finished, Job

#: how often the socket is looked for while the program starts
POLL_S = 0.001


_target = target_of


class _Watcher:
    """Starts the session as soon as the child's runtime listens (a thread)."""

    def __init__(self, child: Child, open_session: Callable[[int], LiveSession] = LiveSession):
        self.child = child
        self.open_session = open_session
        self.session: LiveSession | None = None
        self.connected_after_s = 0.0
        self.problem = ""
        self.started = time.monotonic()
        self.thread = threading.Thread(target=self._watch, name="profkit-watch", daemon=True)
        self.thread.start()

    def _watch(self) -> None:
        pid = self.child.pid
        while self.child.running():
            if find_socket(pid) is not None:
                try:
                    self.session = self.open_session(pid)
                except DiagnosticsError as exc:  # not ready yet: try again
                    self.problem = str(exc)
                else:
                    self.connected_after_s = time.monotonic() - self.started
                    self._follow(self.session)
                    return
            time.sleep(POLL_S)
        self.problem = self.problem or "the program ended before its diagnostics port opened"

    def _follow(self, session: LiveSession) -> None:
        """Thread names and mapped images, read while the program lives (gone after)."""
        while self.child.running():
            session.refresh_names()
            time.sleep(0.25)


class SampleEngine(ChildEngine):
    """Runs a :class:`~profkit.clr.engine.DotnetTarget`, sampled from outside (its child
    started, signalled and waited for by :mod:`profkit.engine.child`)."""

    def unavailable(self, job: Job) -> str | None:
        return host_unavailable(job)

    def prepare(self, job: Job) -> tuple[str, ...]:
        from profkit.clr.assembly import check_assembly
        from profkit.dotnet.profile import check_clock

        target = _target(job)
        check_assembly(target.assembly)
        check_clock(job.settings.sample_clock, "--sample-clock")
        return (target.assembly,)

    def run(self, job: Job) -> Finished:
        from profkit.clr.host import find_host

        target = _target(job)
        host = find_host(target.dotnet)
        with run_child([host.path, target.assembly, *target.args]) as child:
            watcher = _Watcher(child)
            outcome = child.wait()
        watcher.thread.join()
        session = watcher.session
        if session is None:
            job.say(f"profkit: note: nothing sampled: {watcher.problem}\n")
            return Finished(outcome, None)
        session.stream.done.wait(30.0)
        meta: dict[str, Any] = {
            "argv": [target.assembly, *target.args],
            "dotnet": host.path,
            "exit_status": outcome.status,
            "settings": job.settings.as_dict(),
        }
        profile = session.profile(job.settings.sample_clock, meta, job.settings.prefixes)
        sampler = profile.metadata["sampler"]
        sampler["unseen_start_ns"] = int(watcher.connected_after_s * 1e9)
        job.say(
            f"profkit: sampled through EventPipe from {watcher.connected_after_s * 1e3:.0f} ms "
            f"after start: {sampler['samples']} samples from {len(sampler['threads'])} thread(s)\n"
        )
        return Finished(outcome, profile)
