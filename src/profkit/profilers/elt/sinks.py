"""Where event lines go: a text stream (stderr or a file) and/or UDP datagrams.

The profiler's hot path only appends a finished line to a :class:`collections.deque`
(atomic under the GIL, so no lock and no lost line when a flush runs concurrently). A
background :class:`LineFlusher` thread drains it every ``period`` seconds, and at
shutdown, and hands the batch to each sink. The program therefore never waits for a
terminal or a network: the UDP socket is non-blocking, and a datagram the kernel will
not take is dropped and *counted* (the ``dropped`` field of the next datagram, so the
monitor can show loss that happened before the network). If the program produces lines
faster than the flusher drains them, the queue is cut at ``max_queued`` lines, also
counted, so memory stays bounded.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections import deque
from typing import IO, Protocol

from profkit import _streamfile as streamfile
from profkit.wire import udp as protocol


class Sink(Protocol):
    def write_lines(self, lines: list[str]) -> None: ...

    def close(self) -> None: ...


class TextSink:
    """Event lines to a text stream (``stderr``) or to a file opened for writing."""

    def __init__(self, target: str) -> None:
        self._owned = target != "stderr"
        self._out: IO[str] = sys.stderr
        if self._owned:
            # {pid}: child processes get their own file (see output.child_template). The
            # runner's checked file when it opened one, never the path reopened.
            path = target.replace("{pid}", str(os.getpid()))
            self._out = streamfile.take(path) or streamfile.open_stream(path)

    def write_lines(self, lines: list[str]) -> None:
        try:
            self._out.write("\n".join(lines) + "\n")
            self._out.flush()
        except (OSError, ValueError):
            pass  # a closed/broken stream must not break the profiled program

    def close(self) -> None:
        if self._owned:
            self._out.close()


class UdpSender:
    """Event lines as ``profkit.wire.udp`` datagrams (docs/wire.md); the program never waits.

    ``seq`` counts datagrams actually handed to the kernel, so a gap seen by the monitor
    is loss on the way. Lines that could not be sent are counted once: ``socket_dropped``
    here (the kernel refused them), ``queue_dropped`` from the flusher (its queue was
    full); the datagram header carries their sum. To a loopback address datagrams are up
    to 16 KB (a 64 KB MTU: fewer, bigger datagrams for the monitor to take); when the
    socket buffer is full the flusher thread waits up to :attr:`patience` seconds for
    room before dropping — backpressure on the sending thread, never on the program.
    """

    def __init__(
        self, address: tuple[str, int], sender: str | None = None, *, patience: float = 0.05
    ) -> None:
        import ipaddress
        import socket  # only when streaming

        host, port = address
        self.sender = sender or f"{socket.gethostname().split('.')[0] or 'host'}/{os.getpid()}"
        self.seq = 0
        self.socket_dropped = 0
        self.queue_dropped = 0
        self.sent_datagrams = 0
        self.patience = patience
        # The address family from the resolver, not from the spelling: a host name may
        # resolve to IPv6 only.
        family, _, _, _, sockaddr = socket.getaddrinfo(host, port, type=socket.SOCK_DGRAM)[0]
        loopback = ipaddress.ip_address(str(sockaddr[0]).partition("%")[0]).is_loopback
        self.max_datagram = protocol.MAX_LOOPBACK_DATAGRAM if loopback else protocol.MAX_DATAGRAM
        self._sock = socket.socket(family, socket.SOCK_DGRAM)
        self._sock.setblocking(False)
        with contextlib.suppress(OSError):  # else the system's default buffer
            self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
        try:
            self._sock.connect(sockaddr)  # resolved once; send() needs no address
        except OSError:
            self._sock.close()
            raise

    @property
    def dropped(self) -> int:
        """Every line not sent, counted once (what the datagram header says)."""
        return self.socket_dropped + self.queue_dropped

    def write_lines(self, lines: list[str]) -> None:
        import select

        for body in protocol.pack(lines, max_datagram=self.max_datagram):
            data = protocol.with_header(self.sender, self.seq, self.dropped, body)
            try:
                self._sock.send(data)
            except BlockingIOError:
                # Buffer full: wait a little for room (this is the flusher's thread).
                try:
                    select.select([], [self._sock], [], self.patience)
                    self._sock.send(data)
                except (BlockingIOError, InterruptedError, OSError, ValueError):
                    self.socket_dropped += body.count(b"\n")
                    continue
            except (InterruptedError, OSError):
                # No listener (ECONNREFUSED from an earlier ICMP) and the like: drop, count.
                self.socket_dropped += body.count(b"\n")
                continue
            self.seq += 1
            self.sent_datagrams += 1

    def add_dropped(self, count: int) -> None:
        """Lines the flusher dropped before they reached this sender."""
        self.queue_dropped += count

    def close(self) -> None:
        self._sock.close()


class LineFlusher:
    """Drains the profiler's line queue into the sinks on a daemon thread."""

    def __init__(
        self, sinks: list[Sink], *, period: float = 0.05, max_queued: int = 200_000
    ) -> None:
        self.queue: deque[str] = deque()
        self.sinks = sinks
        self.dropped = 0
        self._period = period
        self._max = max_queued
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        self.thread = threading.Thread(target=self._run, name="profkit-lines", daemon=True)
        self.thread.profkit_internal = True  # type: ignore[attr-defined]  # collector: skip it
        self.thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._period):
            self.flush()

    def flush(self) -> None:
        """Move every queued line to the sinks (thread-safe; callable from any thread)."""
        with self._lock:
            queue = self.queue
            count = len(queue)
            if count > self._max:
                # Bounded memory: drop the oldest excess, count it, tell the monitor.
                excess = count - self._max
                for _ in range(excess):
                    queue.popleft()
                self.dropped += excess
                for sink in self.sinks:
                    if isinstance(sink, UdpSender):
                        sink.add_dropped(excess)
                count -= excess
            if not count:
                return
            pop = queue.popleft
            lines = [pop() for _ in range(count)]
            for sink in self.sinks:
                sink.write_lines(lines)

    def close(self) -> None:
        """Stop the thread, flush what is left, close the sinks."""
        self._stop.set()
        if self.thread is not None and self.thread is not threading.current_thread():
            self.thread.join(timeout=2.0)
        self.flush()
        for sink in self.sinks:
            sink.close()
