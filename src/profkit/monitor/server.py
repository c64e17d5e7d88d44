"""The receive loop: one UDP socket, batch receive into preallocated buffers, batched output.

Per datagram the loop does one decode, one split of the body at its durations and a few
dictionary updates per close line; output is flushed a few times a second, not per
line. ``bench/monitor_bench.py`` measures it against a receive-only ceiling.
"""

from __future__ import annotations

import ipaddress
import select
import socket
import threading
import time
from collections.abc import Callable, Hashable, Sequence
from typing import Protocol, TextIO

from profkit.errors import UsageError
from profkit.monitor.core import Monitor
from profkit.monitor.receive import BATCH, queue_fill, receiver
from profkit.monitor.view import write
from profkit.wire.udp import MIN_WINDOW, encode_ack

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 2222
#: Kernel receive buffer asked for: bursts wait here while the loop is busy printing.
RCVBUF = 32 << 20
#: Receive queue fill (of its limit) above which the loop is behind once the queue has
#: not been empty for :data:`BEHIND` seconds (at once above :data:`FULL`), and below
#: which it has caught up (see :func:`serve`); in between the stride stays as it is.
BEHIND_FILL = 0.3
FULL = 0.8
CAUGHT_UP_FILL = 0.1
#: Seconds of a never-empty queue that may count as behind: a burst of the sender's
#: (100,000 lines at once from the ELT profiler's flusher) fills the queue for less.
BEHIND = 0.1
#: Seconds the loop waits for the display thread's last write when it ends.
DISPLAY_JOIN = 5.0
#: At most one datagram in this many goes into the hot list while behind.
MAX_STRIDE = 16


class View(Protocol):
    """What the receive loop drives; the loop never writes output itself, so the plain
    and the terminal view (and the benchmark's null view) share one loop."""

    out: TextIO

    def show(self, monitor: Monitor, sender: str, body: str) -> None:
        """A datagram's lines arrived (called per datagram: must only buffer)."""

    def render(self, monitor: Monitor) -> str:
        """A few times a second: the text to write now (the display thread writes it)."""

    def close(self, monitor: Monitor) -> None:
        """The loop ended: write what is left (the summary is printed by the caller)."""


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT``, ``[::1]:PORT``, ``:PORT`` or ``PORT`` (host 127.0.0.1).

    Port 0 asks the kernel for a free port (the monitor prints the one it got): what
    scripts and tests want, since a port picked in advance may be taken meanwhile.
    """
    text = text.strip()
    host, sep, port_text = text.rpartition(":")
    if not sep:
        host, port_text = "", text
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not (port_text.isascii() and port_text.isdigit()) or not 0 <= int(port_text) < 65536:
        raise UsageError(f"bad --listen {text!r}: expected HOST:PORT, e.g. 127.0.0.1:2222")
    return host or DEFAULT_HOST, int(port_text)


def is_wildcard(host: str) -> bool:
    """An address that binds every interface (so other machines could send to it).

    Judged on the address the bind will use, not on the spelling: ``0``, ``0x0``,
    ``0.0.0``, ``[::0]`` and ``[::ffff:0.0.0.0]`` all mean "any" to the resolver
    (issue #17); a name that cannot be resolved binds nothing, so it is no wildcard.
    """
    if host in ("*", ""):
        return True
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_DGRAM, flags=socket.AI_PASSIVE)
    except (OSError, UnicodeError, ValueError):
        return False
    return any(_unspecified(str(info[4][0])) for info in infos)


def _unspecified(address: str) -> bool:
    try:
        ip = ipaddress.ip_address(address.partition("%")[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped.is_unspecified
    return ip.is_unspecified


def is_loopback(host: str) -> bool:
    """True when ``host`` names a loopback address (``localhost`` is resolved)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        try:
            infos = socket.getaddrinfo(host, None, type=socket.SOCK_DGRAM)
        except OSError:
            return False
        return bool(infos) and all(ipaddress.ip_address(i[4][0]).is_loopback for i in infos)


def open_socket(host: str, port: int) -> socket.socket:
    """A bound UDP socket with a large receive buffer; errors become :class:`UsageError`."""
    bind_host = "0.0.0.0" if host == "*" else host
    family = socket.AF_INET6 if ":" in bind_host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_DGRAM)
    try:
        _large_receive_buffer(sock)
        sock.bind((bind_host, port))
    except OSError as exc:
        sock.close()
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return sock


def _large_receive_buffer(sock: socket.socket) -> None:
    """Ask for the largest kernel receive buffer allowed (at least :data:`RCVBUF`): bursts
    wait there while the loop is busy. ``SO_RCVBUF`` is capped by ``net.core.rmem_max``
    (often 208 KB: a tenth of a second at a million lines/s); ``SO_RCVBUFFORCE`` passes
    the cap where permitted (CAP_NET_ADMIN), so it is tried first. Linux doubles the value
    (bookkeeping) and reports the doubled one: :func:`receive_buffer`."""
    size = max(RCVBUF, _rmem_max())
    force = getattr(socket, "SO_RCVBUFFORCE", None)
    if force is not None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, force, size)
            return
        except OSError:
            pass
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, size)


def _rmem_max() -> int:
    """``net.core.rmem_max`` (Linux), capped at 1 GB; 0 where unknown."""
    try:
        with open("/proc/sys/net/core/rmem_max", encoding="ascii") as f:
            return min(int(f.read().strip()), 1 << 30)
    except (OSError, ValueError):
        return 0


def receive_buffer(sock: socket.socket) -> int:
    """The receive buffer the kernel gave ``sock``, in bytes."""
    return int(sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF))


def ack_window(buffer: int, senders: int) -> int:
    """Bytes each of ``senders`` active senders may have in flight: half the receive
    buffer shared among them (the kernel counts ~5 % more per 16 KB datagram than its
    payload; the other half is headroom for senders that do not acknowledge)."""
    return max(MIN_WINDOW, buffer // 2 // max(senders, 1))


def serve(
    sock: socket.socket,
    monitor: Monitor,
    view: View,
    *,
    stop: threading.Event | None = None,
    refresh: float = 0.25,
    idle_timeout: float = 0.05,
    acknowledge: bool = True,
) -> None:
    """Receive until ``stop`` is set (or KeyboardInterrupt), feeding ``monitor`` and ``view``.

    Batch receive: the socket is non-blocking, and every datagram already queued is taken
    in a tight loop (``recvmmsg``, up to 32 a system call, see :mod:`.receive`; no wait
    and no timer in between); only when the queue is empty does the loop wait
    (``select``, up to ``idle_timeout``). The view only buffers in ``show``; a display
    thread (:class:`Display`) renders it every ``refresh`` seconds and writes it, so a
    slow terminal or a full pipe never stops the receiving: the two share a lock only
    while a batch is fed and while the text is rendered, never during the write.

    Falling behind: when the kernel's receive queue is more than 30 % full
    (:data:`BEHIND_FILL`) and has not been empty for :data:`BEHIND` seconds, or is nearly
    full (where the kernel does not tell the fill: not empty for :data:`BEHIND`
    seconds), it will soon drop datagrams — lines nobody sees and loss that is the
    monitor's own. So the loop sheds the costly part instead: of each batch only every
    ``stride``-th datagram goes into the hot list (``stride`` doubling per batch while
    behind, up to :data:`MAX_STRIDE`; back to 1 once the queue is under 10 % full
    or empty). Every datagram is still checked, counted and shown; the summary says how
    many were not analysed (``Monitor.unanalysed``).

    Flow control (``acknowledge``): after each batch every sender heard gets one small
    acknowledgement (``PK1A``, docs/wire.md) saying which of its datagrams were taken and
    how many bytes it may have in flight (:func:`ack_window`), so a fast sender waits for
    the monitor instead of overflowing its buffer. At most one per sender per batch, each
    smaller than the datagram that prompted it, sent without blocking.

    The caller writes what is left (``view.close``) after this returns; an error of the
    display thread's write (a full disk) ends the loop and is raised here.
    """
    sock.setblocking(False)
    receive = receiver(sock)
    fill = queue_fill(sock)
    clock = time.monotonic
    buffer = receive_buffer(sock)
    window = ack_window(buffer, 1)
    heard: dict[str, int] = {}  # sender -> index of its last datagram in this batch
    lock = threading.Lock()
    display = Display(view, monitor, lock, refresh)
    display.start()
    next_window = clock() + refresh
    stride = 1
    busy_since = clock()  # when the queue was last found empty
    try:
        while (stop is None or not stop.is_set()) and display.error is None:
            burst = 0
            now = clock()  # once per batch: a datagram's arrival time within a few ms
            while burst < 4096:  # then look at the stop flag again
                datagrams = receive()
                if not datagrams:
                    break
                burst += len(datagrams)
                stride = _next_stride(stride, len(datagrams), fill, now - busy_since)
                with lock:
                    _feed_batch(monitor, view, datagrams, now, stride, heard)
                    if heard and acknowledge:
                        _acknowledge(
                            monitor, heard, receive.sources(len(datagrams)), receive.reply, window
                        )
                now = clock()
                if now >= next_window:
                    window = ack_window(buffer, _active(monitor, now))
                    next_window = now + refresh
            if not burst:
                stride = 1
                busy_since = now
                select.select([sock], [], [], idle_timeout)  # PEP 475: retried after a signal
    finally:
        display.stop(DISPLAY_JOIN)
    if display.error is not None:
        raise display.error


def _next_stride(stride: int, count: int, fill: Callable[[], float] | None, busy_for: float) -> int:
    """Every how many datagrams of the next batch go into the hot list (see :func:`serve`)."""
    if count < BATCH:
        return 1  # the queue is empty now
    if fill is not None:
        return _stride_by_fill(stride, fill(), busy_for)
    return _stride(stride, busy_for)


def _feed_batch(
    monitor: Monitor,
    view: View,
    datagrams: Sequence[memoryview],
    now: float,
    stride: int,
    heard: dict[str, int],
) -> None:
    """Check, count and show every datagram of a batch; note each sender's last one."""
    heard.clear()
    feed = monitor.feed
    show = view.show
    for i, data in enumerate(datagrams):
        result = feed(data, now, i % stride == 0)
        if result is not None:
            show(monitor, result[0], result[1])
            heard[result[0]] = i


class Display(threading.Thread):
    """Renders the view every ``refresh`` seconds (under ``lock``, shared with the receive
    loop) and writes the text (outside it), so the receive loop never waits for output.

    A write error (a full disk, a closed pipe) is kept in :attr:`error` and ends the
    thread; the receive loop sees it and stops.
    """

    def __init__(self, view: View, monitor: Monitor, lock: threading.Lock, refresh: float) -> None:
        super().__init__(name="profkit-monitor-display", daemon=True)
        self.view = view
        self.monitor = monitor
        self.lock = lock
        self.refresh = refresh
        self.error: OSError | None = None
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.wait(self.refresh):
            with self.lock:
                text = self.view.render(self.monitor)
            try:
                write(self.view.out, text)
            except OSError as exc:
                self.error = exc
                return

    def stop(self, timeout: float = 5.0) -> None:
        """Stop and wait for the thread (its last write included), at most ``timeout``
        seconds: a write blocked for good (a paused terminal) must not keep Ctrl-C from
        ending the loop."""
        self._halt.set()
        if self.is_alive():
            self.join(timeout)


def _acknowledge(
    monitor: Monitor,
    heard: dict[str, int],
    sources: list[Hashable],
    reply: Callable[[Hashable, bytes], None],
    window: int,
) -> None:
    """One acknowledgement per sender heard in this batch, to the address of its last
    datagram: every datagram below ``next_seq`` was taken (docs/wire.md)."""
    senders = monitor.senders
    for sender, i in heard.items():
        stats = senders.get(sender)
        if stats is not None:
            reply(sources[i], encode_ack(sender, stats.next_seq, window))


def _active(monitor: Monitor, now: float, within: float = 1.0) -> int:
    """Senders heard in the last ``within`` seconds (they share the window)."""
    return sum(1 for s in monitor.senders.values() if now - s.last_seen <= within)


def _stride_by_fill(stride: int, fill: float, busy: float) -> int:
    """The next batch's analysis stride when the receive queue is ``fill`` full and has not
    been empty for ``busy`` seconds. A burst that fills the queue and is gone within
    :data:`BEHIND` is what the buffer is for: it is shed only when nearly full."""
    if fill > FULL or (fill > BEHIND_FILL and busy >= BEHIND):
        return min(stride * 2, MAX_STRIDE)
    return 1 if fill < CAUGHT_UP_FILL else stride


def _stride(stride: int, busy: float) -> int:
    """The next batch's analysis stride after ``busy`` seconds without an empty queue."""
    return min(stride * 2, MAX_STRIDE) if busy >= BEHIND else 1
