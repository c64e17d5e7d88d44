"""UDP datagrams of event lines, sent without the program ever waiting (see :class:`UdpSender`).

Split from :mod:`profkit.profilers.elt.sinks`, which hands it the flusher's chunks; the
protocol (datagram header, acknowledgements, windows) is :mod:`profkit.wire.udp`'s.
"""

from __future__ import annotations

import contextlib
import errno
import os
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

from profkit.wire import udp as protocol

if TYPE_CHECKING:
    from profkit.wire.mmsg import MmsgSender


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
