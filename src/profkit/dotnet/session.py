"""A live EventPipe session on a running .NET process: start, read, stop, profile.

The stream is read on a background thread and fed to the incremental nettrace parser as
it arrives (the runtime's buffer never fills, and ``top`` sees samples as they come).
Method names: the session's own provider list asks for method loads during the session
(``Jit``/``Loader`` keywords), the runtime's rundown at the session's end names every
method loaded before; and right after the session starts a second, empty session is
started and stopped at once so that its rundown names what was loaded *before* sampling
began even if the target exits mid-session (a process that exits takes the end rundown
with it). A target that exits is not an error: what was seen is kept.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any, BinaryIO

from profkit.calltree.model import CallProfile
from profkit.dotnet.collector import Collector
from profkit.dotnet.images import MappedImages
from profkit.dotnet.ipc import Provider, start_session, stop_session
from profkit.dotnet.process import diagnostics_socket
from profkit.dotnet.profile import build_profile
from profkit.errors import FormatError
from profkit.formats.nettrace import Event, NettraceParser, TraceHeader
from profkit.formats.nettrace import clr_events as ce

#: keywords of Microsoft-Windows-DotNETRuntime: Loader, Jit, NGen (R2R), Threading
RUNTIME_KEYWORDS = 0x8 | 0x10 | 0x20 | 0x10000
#: the sample profiler's (every keyword: its one event has none)
SAMPLER_KEYWORDS = 0xF00000000000
PROVIDERS = (
    Provider(ce.SAMPLE_PROFILER, SAMPLER_KEYWORDS, 5),
    Provider(ce.RUNTIME, RUNTIME_KEYWORDS, 5),
)
#: the names-only session: method loads, no samples (its value is its rundown)
NAMES_ONLY = (Provider(ce.RUNTIME, 0x8 | 0x10 | 0x20, 4),)
CHUNK = 1 << 16
#: how long the end of a stream (the rundown) may take after StopTracing
STOP_TIMEOUT_S = 60.0


def thread_names(pid: int) -> dict[int, str]:
    """The kernel's names of ``pid``'s threads (CoreCLR passes ``Thread.Name`` on)."""
    out: dict[int, str] = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as fh:
                out[int(tid)] = fh.read().strip()
        except (OSError, ValueError):
            continue
    return out


class _Stream:
    """One connection's stream, parsed on a thread; records go to ``take``."""

    def __init__(self, sock: socket.socket, name: str, take: Callable[[list[Any]], None]):
        self.sock = sock
        self.parser = NettraceParser(name)
        self.take = take
        self.bytes = 0
        self.error: Exception | None = None
        self.truncated = False
        self.done = threading.Event()
        self.raw: BinaryIO | None = None
        self.thread = threading.Thread(target=self._read, name="profkit-eventpipe", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def _read(self) -> None:
        try:
            while True:
                chunk = self.sock.recv(CHUNK)
                if not chunk:
                    break
                self.bytes += len(chunk)
                if self.raw is not None:
                    self.raw.write(chunk)
                self.take(self.parser.feed(chunk))
            self.truncated = self.parser.finish() is not None
        except (OSError, FormatError) as exc:
            self.error = exc
        finally:
            self.done.set()
            self.sock.close()


class LiveSession:
    """Samples ``pid`` until :meth:`stop` (or the target's exit); then :meth:`profile`."""

    def __init__(
        self,
        pid: int,
        *,
        raw: BinaryIO | None = None,
        names_session: bool = True,
        providers: tuple[Provider, ...] = PROVIDERS,
        collector: Collector | None = None,
    ):
        self.pid = pid
        self.path = diagnostics_socket(pid)
        self.collector = collector or Collector()
        self.lock = threading.Lock()
        self.names: dict[int, str] = thread_names(pid)
        self.images = MappedImages(pid)
        self.images.refresh()
        self.started = time.monotonic()
        sock, self.session_id = start_session(self.path, providers)
        self.stream = _Stream(sock, f"pid {pid}'s EventPipe stream", self._take)
        self.stream.raw = raw
        self.stream.start()
        self.stopped = False
        if names_session:
            threading.Thread(target=self._early_names, name="profkit-rundown", daemon=True).start()

    def _take(self, records: list[Any]) -> None:
        with self.lock:
            for r in records:
                if isinstance(r, Event):
                    self.collector.add(r, self.stream.parser.metadata)
                elif isinstance(r, TraceHeader):
                    self.collector.header = r

    def _early_names(self) -> None:
        """A second session stopped at once: its rundown names the methods loaded so far."""
        try:
            sock, sid = start_session(self.path, NAMES_ONLY)
        except Exception:  # the target went away or refuses a second session: names later
            return
        found: list[ce.MethodEvent] = []

        def take(records: list[Any]) -> None:
            pointer = 8
            for r in records:
                if isinstance(r, TraceHeader):
                    pointer = r.pointer_size
                elif isinstance(r, Event):
                    md = side.parser.metadata[r.metadata_id]
                    m = ce.method_event(md, r.payload, pointer)
                    if m is not None and m.kind != "unload":
                        found.append(m)

        side = _Stream(sock, f"pid {self.pid}'s rundown stream", take)
        side.start()
        stop_session(self.path, sid)
        side.done.wait(STOP_TIMEOUT_S)
        with self.lock:
            for m in found:
                self.collector.methods.add_if_new(m)

    @property
    def ended(self) -> bool:
        """The stream ended (the target exited, or the session was stopped)."""
        return self.stream.done.is_set()

    def refresh_names(self) -> None:
        """Thread names and mapped images, read while the target lives."""
        fresh = thread_names(self.pid)
        with self.lock:
            self.names.update(fresh)
            self.images.refresh()

    def wait(self, seconds: float | None, stop: threading.Event) -> str:
        """Until ``seconds`` passed, ``stop`` is set or the target's stream ended; why."""
        deadline = None if seconds is None else time.monotonic() + seconds
        while True:
            left = 0.25 if deadline is None else min(0.25, deadline - time.monotonic())
            if left <= 0:
                return "duration"
            if self.stream.done.wait(left):
                return "exited"
            if stop.is_set():
                return "stopped"
            self.refresh_names()

    def stop(self) -> None:
        """End the session (the rundown follows on the stream) and wait for its end."""
        if self.stopped:
            return
        self.stopped = True
        if not self.ended:
            self.refresh_names()
            stop_session(self.path, self.session_id)
            self.stream.done.wait(STOP_TIMEOUT_S)

    def profile(
        self,
        clock: str = "wall",
        metadata: dict[str, Any] | None = None,
        prefixes: tuple[str, ...] = (),
    ) -> CallProfile:
        with self.lock:
            self.images.attach_to(self.collector.methods)
            extra = {
                "stream_bytes": self.stream.bytes,
                "stream_truncated": self.stream.truncated,
                "stream_error": str(self.stream.error) if self.stream.error else "",
            }
            return build_profile(
                self.collector,
                self.stream.parser.stacks,
                pid=self.pid,
                thread_names=self.names,
                clock=clock,
                prefixes=prefixes,
                metadata={"eventpipe": extra, **(metadata or {})},
            )
