"""Where event lines go: a text stream (stderr or a file) and/or UDP datagrams.

The profiler's hot path only hands a finished line to :meth:`LineFlusher.append`: a
length check and a :class:`collections.deque` append (atomic under the GIL, so no lock
and no lost line when a flush runs concurrently). The queue is bounded *there*: a line
arriving when :attr:`LineFlusher.max_queued` lines wait is dropped and counted, so memory
stays bounded however far the sending falls behind. A background thread drains the
queue in chunks every few milliseconds (and at shutdown) and hands them to each sink.

The program never waits for a terminal or a network. The UDP socket is non-blocking;
a monitor that acknowledges (docs/wire.md, "Flow control") sets how many bytes may be in
flight, and the sender holds the rest in its queue instead of overflowing the monitor's
receive buffer, where it would be lost unseen. Every line not sent is counted once and
the count travels in the next datagram's header, so the monitor shows loss that
happened before the network.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Protocol

from profkit import _streamfile as streamfile
from profkit.wire import udp as protocol

if TYPE_CHECKING:
    from profkit.wire.mmsg import MmsgSender


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


#: Errors after which a datagram is worth trying again a moment later (no room now).
_NO_ROOM = frozenset({errno.EAGAIN, errno.EWOULDBLOCK, errno.ENOBUFS, errno.EINTR})


class UdpSender:
    """Event lines as ``profkit.wire.udp`` datagrams (docs/wire.md); the program never waits.

    :meth:`write_lines` packs lines into datagram bodies (a backlog) and :meth:`pump`
    sends what may go now, many datagrams per system call (``sendmmsg`` with the GIL
    held, :mod:`profkit.wire.mmsg`; one ``send`` each elsewhere). Flow control: once the
    monitor has acknowledged (``PK1A``), at most its ``window`` bytes are in flight;
    the rest waits in the backlog (:meth:`ready` is False, and the flusher stops taking
    lines, which then wait in its bounded queue). A monitor that never acknowledges gets
    every datagram at once, as a plain UDP receiver expects. Silence while the window is
    full: a probe datagram every :data:`PROBE` seconds (a restarted monitor answers it);
    after :data:`STALL` seconds the sender stops waiting for acknowledgements. One probe
    at a time: the next only once the last one was acknowledged.

    ``seq`` counts datagrams actually handed to the kernel, so a gap seen by the monitor
    is loss on the way. Lines that could not be sent are counted once: ``socket_dropped``
    here (the kernel refused them, or they were still waiting at close), ``queue_dropped``
    from the flusher (its queue was full); the datagram header carries their sum. To a
    loopback address datagrams are up to 16 KB (a 64 KB MTU: fewer, bigger datagrams for
    the monitor to take).
    """

    #: Seconds without an acknowledgement, window full, before one datagram goes anyway.
    PROBE = 0.2
    #: Seconds without an acknowledgement, window full, before acknowledgements are no
    #: longer waited for (the monitor went away, or stopped answering).
    STALL = 2.0

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
        #: bytes the monitor lets be in flight (its last acknowledgement); None: no flow control
        self.window: int | None = None
        #: every datagram below this number was taken by the monitor (acknowledged)
        self.acked = 0
        self.acks = 0
        self._in_flight: deque[tuple[int, int]] = deque()  # (seq, bytes), not acknowledged
        self._in_flight_bytes = 0
        self._backlog: deque[bytes] = deque()  # packed bodies not sent yet
        self._last_ack = 0.0  # monotonic time of the latest acknowledgement
        self._probe = -1  # seq of the latest probe sent beyond the window
        self._last_send = 0.0
        self._reported = 0  # the dropped count the latest datagram carried
        self._sender_bytes = self.sender.encode("utf-8", "replace")
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
        self._mmsg = _mmsg_sender(self._sock.fileno())
        self._recv = _gil_held_recv(self._sock.fileno()) or self._recv_socket

    @property
    def dropped(self) -> int:
        """Every line not sent, counted once (what the datagram header says)."""
        return self.socket_dropped + self.queue_dropped

    @property
    def in_flight(self) -> int:
        """Bytes sent and not yet acknowledged (counted only under flow control)."""
        return self._in_flight_bytes

    def write_lines(self, lines: list[str]) -> None:
        """Pack ``lines`` into datagram bodies after the backlog and send what may go."""
        self._backlog.extend(protocol.pack(lines, max_datagram=self.max_datagram))
        self.pump()

    def ready(self) -> bool:
        """True when nothing waits to be sent (the flusher may hand over more lines)."""
        return not self._backlog

    def pump(self) -> None:
        """Read acknowledgements, then send as much of the backlog as the window allows."""
        self._read_acks()
        backlog = self._backlog
        waited = False  # for room once per refused datagram, then it is dropped
        while backlog:
            count = self._sendable()
            if not count:
                return
            first = self.seq
            dropped = self.dropped
            bodies = [backlog[i] for i in range(count)]
            datagrams = [
                protocol.with_header(self.sender, first + i, dropped, body)
                for i, body in enumerate(bodies)
            ]
            sent, error = self._send(datagrams)
            if sent:
                self._reported = dropped
                self._last_send = time.monotonic()
            for i in range(sent):
                backlog.popleft()
                if self.window is not None:
                    self._in_flight.append((first + i, len(datagrams[i])))
                    self._in_flight_bytes += len(datagrams[i])
            self.seq += sent
            self.sent_datagrams += sent
            if error:
                # The next datagram was refused: wait a little for room (this is the
                # flusher's thread, never the program's), then drop it and count it.
                if error in _NO_ROOM and not waited and self._wait_writable():
                    waited = True
                    continue
                self.socket_dropped += backlog.popleft().count(b"\n")
            waited = False

    def _sendable(self) -> int:
        """How many backlog datagrams may go now (0: wait for an acknowledgement)."""
        backlog = self._backlog
        if self.window is None:
            return len(backlog)
        room = self.window - self._in_flight_bytes
        count = 0
        for body in backlog:
            room -= len(body) + protocol.MAX_HEADER
            if room < 0:
                break
            count += 1
        if count or not self._in_flight:
            return count or 1  # one datagram larger than the window still goes alone
        now = time.monotonic()
        if now - self._last_ack >= self.STALL:
            self.window = None  # nobody acknowledges any more: send as a plain stream
            self._in_flight.clear()
            self._in_flight_bytes = 0
            return len(backlog)
        probe_answered = self._probe < 0 or self.acked > self._probe
        if probe_answered and now - max(self._last_ack, self._last_send) >= self.PROBE:
            self._probe = self.seq  # one probe at a time: a monitor that restarted answers it
            return 1
        return 0

    def _read_acks(self) -> None:
        """Take every acknowledgement queued on the socket (never blocks)."""
        best = -1
        while True:
            data = self._recv()
            if data is None:
                break
            try:
                sender, next_seq, window = protocol.decode_ack(data)
            except protocol.MalformedDatagram:
                continue
            if sender != self.sender or next_seq > self.seq:
                continue  # not about this run's datagrams
            self.acks += 1
            if next_seq > best:
                best = next_seq
                self.window = max(window, protocol.MIN_WINDOW)
        if best < 0:
            return
        self._last_ack = time.monotonic()
        self.acked = max(self.acked, best)
        in_flight = self._in_flight
        while in_flight and in_flight[0][0] < self.acked:
            self._in_flight_bytes -= in_flight.popleft()[1]

    def _recv_socket(self) -> bytes | None:
        """One queued datagram through the socket module (where libc's recv is not)."""
        try:
            return self._sock.recv(protocol.MAX_ACK + 1)
        except OSError:  # nothing queued, or ECONNREFUSED from an earlier send
            return None

    def wait(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for an acknowledgement (the flusher's thread)."""
        import select

        with contextlib.suppress(OSError, ValueError):
            select.select([self._sock], [], [], timeout)

    def _wait_writable(self) -> bool:
        import select

        try:
            return bool(select.select([], [self._sock], [], self.patience)[1])
        except (OSError, ValueError):
            return False

    def _send(self, datagrams: list[bytes]) -> tuple[int, int]:
        """``(datagrams sent, errno of the first one refused or 0)``."""
        if self._mmsg is not None:
            sent, error = self._mmsg.send(datagrams)
            if error or sent == len(datagrams) or not sent:
                return sent, error
            more, error = self._send(datagrams[sent:])  # more than a batch
            return sent + more, error
        send = self._sock.send
        for i, data in enumerate(datagrams):
            try:
                send(data)
            except OSError as exc:
                return i, exc.errno or errno.EIO
        return len(datagrams), 0

    def add_dropped(self, count: int) -> None:
        """Lines the flusher dropped before they reached this sender."""
        self.queue_dropped += count

    def close(self) -> None:
        """Count what still waits as dropped, tell the monitor the final count, close."""
        while self._backlog:
            self.socket_dropped += self._backlog.popleft().count(b"\n")
        # An empty datagram (outside the window: a few bytes) carries the final count.
        final = protocol.with_header(self.sender, self.seq, self.dropped, b"")
        if self.dropped != self._reported and self._send([final])[0]:
            self.seq += 1
            self.sent_datagrams += 1
        self._sock.close()


def _gil_held_recv(fd: int) -> Callable[[], bytes | None] | None:
    from profkit.wire.mmsg import Recv

    try:
        return Recv(fd, protocol.MAX_ACK + 1)
    except OSError:
        return None


def _mmsg_sender(fd: int) -> MmsgSender | None:
    from profkit.wire.mmsg import MmsgSender

    try:
        return MmsgSender(fd)
    except OSError:
        return None


class LineFlusher:
    """Takes the profiler's lines (:meth:`append`) and drains them into the sinks on a
    daemon thread, in chunks, as fast as the sinks take them."""

    #: Seconds between drains while lines flow, and while none came last time.
    BUSY_PERIOD = 0.005
    IDLE_PERIOD = 0.05
    #: Seconds ``close`` waits for a slow monitor to take what is left.
    CLOSE_TIMEOUT = 5.0

    def __init__(
        self,
        sinks: list[Sink],
        *,
        period: float | None = None,
        max_queued: int = 200_000,
        chunk: int = 16384,
    ) -> None:
        self.queue: deque[str] = deque()
        self.sinks = sinks
        self.max_queued = max_queued
        self._udp = next((s for s in sinks if isinstance(s, UdpSender)), None)
        self._busy = self.BUSY_PERIOD if period is None else period
        self._idle = self.IDLE_PERIOD if period is None else period
        self._chunk = chunk
        self._drops = itertools.count()  # next() is atomic: the program's threads count
        self._drop_reads = 0
        self._dropped = 0  # the queue's drops (as of the last read) + lines left at close
        self._left_at_close = 0
        self._reported = 0  # of which the UDP sender was told
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.thread: threading.Thread | None = None
        self.append = self._capped_append()

    def _capped_append(self) -> Callable[[str], None]:
        """The profiler's emit: queue the line, or count it dropped when the queue is full.

        Checked here, at enqueue time, so the queue never holds more than
        :attr:`max_queued` lines; the newest line is the one dropped (the flusher may be
        taking the oldest at this moment). One length check and one append (C calls)."""
        size = self.queue.__len__
        put = self.queue.append
        drop = self._drops.__next__
        cap = self.max_queued

        def append(line: str) -> None:
            if size() < cap:
                put(line)
            else:
                drop()

        return append

    @property
    def dropped(self) -> int:
        """Lines dropped because the queue was full (or still queued when it closed)."""
        with self._lock:
            self._count_drops()
            return self._dropped

    def _count_drops(self) -> None:
        # next() returns how many next() calls came before: the program's drops plus
        # this method's own reads (caller holds the lock)
        self._dropped = next(self._drops) - self._drop_reads + self._left_at_close
        self._drop_reads += 1

    def start(self) -> None:
        self.thread = threading.Thread(target=self._run, name="profkit-lines", daemon=True)
        self.thread.profkit_internal = True  # type: ignore[attr-defined]  # collector: skip it
        self.thread.start()

    def _run(self) -> None:
        udp = self._udp
        while not self._stop.is_set():
            moved = self.flush()
            if udp is not None and not udp.ready():
                udp.wait(self._busy)  # an acknowledgement opens the window
            else:
                self._stop.wait(self._busy if moved else self._idle)

    def flush(self) -> int:
        """Hand queued lines to the sinks while they take them (thread-safe; callable
        from any thread); returns how many."""
        with self._lock:
            self._count_drops()
            udp = self._udp
            if udp is not None and self._dropped != self._reported:
                udp.add_dropped(self._dropped - self._reported)
                self._reported = self._dropped
            queue = self.queue
            pop = queue.popleft
            moved = 0
            while True:
                if udp is not None:
                    udp.pump()
                    if not udp.ready():
                        break  # the monitor's window is full: lines wait in the queue
                count = min(len(queue), self._chunk)
                if not count:
                    break
                lines = [pop() for _ in range(count)]
                moved += count
                for sink in self.sinks:
                    sink.write_lines(lines)
            return moved

    def close(self) -> None:
        """Stop the thread, send what is left (waiting up to :attr:`CLOSE_TIMEOUT` for a
        slow monitor), count the rest as dropped, close the sinks."""
        self._stop.set()
        if self.thread is not None and self.thread is not threading.current_thread():
            self.thread.join(timeout=2.0)
        udp = self._udp
        deadline = time.monotonic() + self.CLOSE_TIMEOUT
        self.flush()
        while udp is not None and not udp.ready() and time.monotonic() < deadline:
            udp.wait(0.01)
            self.flush()
        with self._lock:
            self._left_at_close += len(self.queue)
            self.queue.clear()
            self._count_drops()
            if udp is not None and self._dropped != self._reported:
                udp.add_dropped(self._dropped - self._reported)
                self._reported = self._dropped
        for sink in self.sinks:
            sink.close()
