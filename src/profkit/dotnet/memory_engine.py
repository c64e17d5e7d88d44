"""``profkit run --mode memory app.dll ARGS``: a .NET program's allocations over EventPipe.

A row of :data:`profkit.runner.choice.CHOICES`, run like ``--mode sample``
(:mod:`profkit.dotnet.engine`: ``dotnet app.dll ARGS`` with profkit's stdin, stdout,
stderr and the program's own exit status; nothing loaded into it; the session starts the
moment the runtime listens), but the session asks for the GC's events instead of stack
samples and the profile is :mod:`profkit.dotnet.memory`'s (bytes by stack and type).
``profkit attach --mode memory PID`` is the same session on a running process
(:func:`allocations_of_pid`).
"""

from __future__ import annotations

import threading
from typing import Any, BinaryIO

from profkit.calltree.model import CallProfile
from profkit.dotnet.engine import SampleEngine, _target, _Watcher
from profkit.dotnet.memory import PROVIDERS, MemoryCollector, build_memory_profile
from profkit.dotnet.session import LiveSession
from profkit.engine.child import run_child
from profkit.engine.contract import Finished, Job


def memory_session(pid: int) -> LiveSession:
    """A live session on ``pid`` that collects allocation ticks and GCs, not samples."""
    return LiveSession(pid, providers=PROVIDERS, collector=MemoryCollector())


def memory_profile(
    session: LiveSession, metadata: dict[str, Any], prefixes: tuple[str, ...] = ()
) -> CallProfile:
    """The session's memory profile (its collector must be a :class:`MemoryCollector`)."""
    collector = session.collector
    assert isinstance(collector, MemoryCollector)
    with session.lock:
        session.images.attach_to(collector.methods)
        stream = session.stream
        extra = {
            "stream_bytes": stream.bytes,
            "stream_truncated": stream.truncated,
            "stream_error": str(stream.error) if stream.error else "",
        }
        return build_memory_profile(
            collector,
            stream.parser.stacks,
            pid=session.pid,
            thread_names=session.names,
            prefixes=prefixes,
            metadata={"eventpipe": extra, **metadata},
        )


class MemoryEngine(SampleEngine):
    """Runs a :class:`~profkit.clr.engine.DotnetTarget`; its allocations from outside."""

    def prepare(self, job: Job) -> tuple[str, ...]:
        from profkit.clr.assembly import check_assembly

        target = _target(job)
        check_assembly(target.assembly)
        return (target.assembly,)

    def run(self, job: Job) -> Finished:
        from profkit.clr.host import find_host

        target = _target(job)
        host = find_host(target.dotnet)
        with run_child([host.path, target.assembly, *target.args]) as child:
            watcher = _Watcher(child, memory_session)
            outcome = child.wait()
        watcher.thread.join()
        session = watcher.session
        if session is None:
            job.say(f"profkit: note: no allocations seen: {watcher.problem}\n")
            return Finished(outcome, None)
        session.stream.done.wait(30.0)
        settings = job.settings.as_dict()
        settings["mode"] = "memory"
        meta: dict[str, Any] = {
            "argv": [target.assembly, *target.args],
            "dotnet": host.path,
            "exit_status": outcome.status,
            "settings": settings,
            "unseen_start_ns": int(watcher.connected_after_s * 1e9),
        }
        profile = memory_profile(session, meta, job.settings.prefixes)
        m = profile.metadata
        job.say(
            f"profkit: allocations through EventPipe from {watcher.connected_after_s * 1e3:.0f} "
            f"ms after start: ~{m['allocated_bytes'] / 2**20:.1f} MiB allocated (estimated from "
            f"{m['alloc_samples']} GCAllocationTick events), {m['gc']['count']} GC(s)\n"
        )
        return Finished(outcome, profile)


def allocations_of_pid(
    pid: int,
    *,
    duration: float | None,
    stop: threading.Event,
    prefixes: tuple[str, ...] = (),
    raw: BinaryIO | None = None,
) -> tuple[CallProfile, str]:
    """``attach --mode memory PID``: the allocations of a running .NET process until
    ``duration``, ``stop`` or its exit, and how it ended (``duration``, ``stopped``,
    ``exited``). Only what is allocated while the session lasts is seen."""
    session = LiveSession(pid, raw=raw, providers=PROVIDERS, collector=MemoryCollector())
    try:
        why = session.wait(duration, stop)
    finally:
        session.stop()
    return memory_profile(session, {"settings": {"mode": "memory"}}, prefixes), why
