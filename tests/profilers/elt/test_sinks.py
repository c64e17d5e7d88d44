"""Event-line sinks: UDP datagrams in the monitor's wire format, drop-and-count, bounded queue."""

from __future__ import annotations

import errno
import socket
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from profkit.profilers.elt import EltProfiler
from profkit.profilers.elt.sinks import LineFlusher, TextSink, UdpSender
from profkit.settings import Settings
from profkit.wire import udp as protocol
from tests.profilers.elt.fake import FakeClock, FakeDriver


@pytest.fixture
def receiver() -> Iterator[socket.socket]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(5)
    yield sock
    sock.close()


def _receive_all(sock: socket.socket) -> list[protocol.Datagram]:
    got = []
    sock.settimeout(0.5)
    try:
        while True:
            data = sock.recv(65536)
            assert len(data) <= protocol.MAX_LOOPBACK_DATAGRAM
            got.append(protocol.decode(data))
    except TimeoutError:
        pass
    return got


def _take(sock: socket.socket) -> list[protocol.Datagram]:
    """What is queued now (no waiting)."""
    got = []
    sock.setblocking(False)
    try:
        while True:
            got.append(protocol.decode(sock.recv(65536)))
    except BlockingIOError:
        pass
    return got


def test_udp_batches_with_sequence_numbers(receiver: socket.socket) -> None:
    sender = UdpSender(receiver.getsockname(), sender="host/1")
    lines = [f"    Enter: app.f{i}" for i in range(2000)]
    sender.write_lines(lines)
    sender.write_lines(["Leave: app.main, Duration: 1.000 us"])
    sender.close()
    grams = _receive_all(receiver)
    assert [g.seq for g in grams] == list(range(len(grams)))
    assert len(grams) > 2  # 2000 lines do not fit one datagram
    assert max(len(protocol.encode("host/1", 0, 0, list(g.lines))) for g in grams) > 1400
    assert all(g.sender == "host/1" and g.dropped == 0 for g in grams)
    assert [line for g in grams for line in g.lines] == [
        *lines,
        "Leave: app.main, Duration: 1.000 us",
    ]


class _Full:
    """A socket whose send buffer is always full (select() waits on the real one)."""

    def __init__(self, real: socket.socket) -> None:
        self.real = real
        self.waits = 0

    def send(self, data: bytes) -> int:
        raise BlockingIOError(errno.EAGAIN, "full")

    def recv_into(self, buffer: bytearray) -> int:
        raise BlockingIOError(errno.EAGAIN, "nothing")

    def fileno(self) -> int:
        self.waits += 1
        return self.real.fileno()

    def close(self) -> None:
        pass


class _FullMmsg:
    def send(self, datagrams: list[bytes]) -> tuple[int, int]:
        return 0, errno.EAGAIN


@pytest.mark.parametrize("mmsg", [False, True])
def test_refused_sends_are_dropped_and_counted(mmsg: bool) -> None:
    sender = UdpSender(("127.0.0.1", 9), sender="s/1")
    real = sender._sock
    full = _Full(real)
    sender._sock = full  # type: ignore[assignment]
    sender._mmsg = _FullMmsg() if mmsg else None  # type: ignore[assignment]
    sender.write_lines(["a", "b", "c"])
    assert (sender.dropped, sender.socket_dropped, sender.seq) == (3, 3, 0)
    assert full.waits  # it waited for room before dropping (backpressure on the flusher)
    sender._sock = real
    sender.close()


def test_linux_sends_with_sendmmsg() -> None:
    if not sys.platform.startswith("linux"):
        pytest.skip("sendmmsg(2) is Linux's")
    sender = UdpSender(("127.0.0.1", 9), sender="s/1")
    assert sender._mmsg is not None
    sender.close()


def test_lines_dropped_are_counted_once(receiver: socket.socket) -> None:
    # issue #11: the flusher's drops were counted by the flusher and again by the sender
    sender = UdpSender(receiver.getsockname(), sender="s/3")
    flusher = LineFlusher([sender], max_queued=10)
    for i in range(25):
        flusher.append(str(i))
    assert len(flusher.queue) == 10  # bounded when the line arrives, not at the next flush
    flusher.close()
    (gram,) = _receive_all(receiver)
    assert (flusher.dropped, sender.queue_dropped, sender.socket_dropped) == (15, 15, 0)
    assert sender.dropped == gram.dropped == 15
    assert list(gram.lines) == [str(i) for i in range(10)]


def test_dropped_count_reaches_the_monitor(receiver: socket.socket) -> None:
    sender = UdpSender(receiver.getsockname(), sender="s/2")
    sender.add_dropped(7)
    sender.write_lines(["x"])
    sender.close()
    (gram,) = _receive_all(receiver)
    assert gram.dropped == 7


def test_a_final_datagram_carries_drops_after_the_last_one(receiver: socket.socket) -> None:
    sender = UdpSender(receiver.getsockname(), sender="s/2")
    sender.write_lines(["x"])
    sender.add_dropped(5)
    sender.close()
    grams = _receive_all(receiver)
    assert [(g.seq, g.dropped, g.lines) for g in grams] == [(0, 0, ("x",)), (1, 5, ())]


class _Keep:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def write_lines(self, lines: list[str]) -> None:
        self.lines += lines

    def close(self) -> None:
        pass


def test_flusher_bounds_its_queue_and_counts() -> None:
    keep = _Keep()
    flusher = LineFlusher([keep], max_queued=10)
    for i in range(25):
        flusher.append(str(i))
    assert flusher.dropped == 15
    assert flusher.dropped == 15  # reading the count does not change it
    flusher.close()
    assert flusher.dropped == 15
    assert keep.lines == [str(i) for i in range(10)]


def test_flusher_counts_drops_from_many_threads() -> None:
    keep = _Keep()
    flusher = LineFlusher([keep], max_queued=100)

    def produce() -> None:
        for i in range(5000):
            flusher.append(str(i))

    threads = [threading.Thread(target=produce) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    flusher.close()
    events = [line for line in keep.lines if not line.startswith("Thread: ")]
    assert len(events) + flusher.dropped == 20000
    assert len(events) == 100


def _ack(monitor: socket.socket, address: object, sender: str, next_seq: int, window: int) -> None:
    monitor.sendto(protocol.encode_ack(sender, next_seq, window), address)  # type: ignore[arg-type]


@pytest.mark.parametrize("reader", ["libc", "socket"])
def test_flow_control_keeps_in_flight_under_the_window(
    receiver: socket.socket, reader: str
) -> None:
    sender = UdpSender(receiver.getsockname(), sender="s/5")
    if reader == "socket":
        sender._recv = sender._recv_socket  # type: ignore[method-assign]
    elif not sys.platform.startswith("linux"):
        pytest.skip("libc's recv through ctypes: Linux")
    sender.PROBE = 600.0  # type: ignore[misc]  # no probe beyond the window, however slow
    lines = [f"    Leave: app.function_{i}, Duration: 1.000 us" for i in range(40000)]
    sender.write_lines(["first"])  # no acknowledgement yet: sent at once
    data, address = receiver.recvfrom(65536)
    assert protocol.decode(data).seq == 0 and sender.window is None
    window = protocol.MIN_WINDOW * 2
    _ack(receiver, address, "s/5", 1, window)
    _ack(receiver, address, "other/1", 1, 10**9)  # another sender's: ignored
    _ack(receiver, address, "s/5", 99, 10**9)  # beyond what was sent: ignored
    receiver.sendto(b"PK1A garbage", address)
    time.sleep(0.05)  # the acknowledgements travel through the kernel (loopback: at once)
    sender.write_lines(lines)
    assert sender.window == window and sender.acked == 1
    assert not sender.ready()  # 40,000 lines (~2 MB) do not fit a 128 KB window
    assert 0 < sender.in_flight <= window
    got = _receive_all(receiver)
    assert sum(len(protocol.encode("s/5", 0, 0, list(g.lines))) for g in got) <= window
    # the monitor takes them: the next part goes
    _ack(receiver, address, "s/5", got[-1].seq + 1, window)
    time.sleep(0.05)
    sender.pump()
    assert sender.acked == got[-1].seq + 1
    more = _receive_all(receiver)
    assert more and more[0].seq == got[-1].seq + 1
    rest: list[protocol.Datagram] = []
    deadline = time.monotonic() + 60  # a bound, not a timing
    while not sender.ready():  # a monitor: take what came, acknowledge, and again
        assert time.monotonic() < deadline
        rest += _take(receiver)
        _ack(receiver, address, "s/5", (rest or more)[-1].seq + 1, window)
        time.sleep(0.01)
        sender.pump()
    sender.close()
    rest += _receive_all(receiver)
    every = [line for g in [*got, *more, *rest] for line in g.lines]
    assert every == lines and sender.dropped == 0


def test_silent_monitor_gets_probes_then_a_plain_stream(receiver: socket.socket) -> None:
    sender = UdpSender(receiver.getsockname(), sender="s/6")
    sender.PROBE, sender.STALL = 0.05, 0.3  # type: ignore[misc]
    sender.write_lines(["first"])
    _, address = receiver.recvfrom(65536)
    _ack(receiver, address, "s/6", 1, protocol.MIN_WINDOW)
    time.sleep(0.05)
    sender.write_lines([f"line {i:06d} " + "x" * 80 for i in range(5000)])
    assert not sender.ready()
    sent = sender.seq
    deadline = time.monotonic() + 60  # a bound, not a timing
    while sender.window is not None:
        assert time.monotonic() < deadline
        time.sleep(0.02)
        sender.pump()
    assert sender.ready() and sender.seq > sent  # probes, then everything
    sender.close()
    assert sender.dropped == 0


def test_flusher_waits_for_the_window_and_counts_what_is_left(receiver: socket.socket) -> None:
    sender = UdpSender(receiver.getsockname(), sender="s/7")
    sender.write_lines(["first"])
    _, address = receiver.recvfrom(65536)
    _ack(receiver, address, "s/7", 1, protocol.MIN_WINDOW)
    time.sleep(0.05)
    flusher = LineFlusher([sender], max_queued=50000)
    flusher.CLOSE_TIMEOUT = 0.2  # type: ignore[misc]
    for i in range(60000):
        flusher.append(f"line {i:06d} " + "x" * 40)
    flusher.flush()
    assert not sender.ready() and len(flusher.queue) > 0  # held back, not lost
    flusher.close()  # nobody acknowledges: gives up after CLOSE_TIMEOUT
    got = _receive_all(receiver)
    received = sum(len(g.lines) for g in got)
    assert received + sender.dropped == 60000
    assert flusher.dropped + sender.socket_dropped == sender.dropped  # counted once
    assert got[-1].dropped == sender.dropped  # the final count reached the monitor


def test_profiler_streams_lines_over_udp(receiver: socket.socket) -> None:
    clock = FakeClock()
    prof = EltProfiler(Settings(udp=receiver.getsockname()), clock=clock, standalone=False)
    d = FakeDriver(prof, clock)
    with d.call("app.main", 1000):
        d.leaf("app.work", 250)
    prof.shutdown()
    lines = [line for g in _receive_all(receiver) for line in g.lines]
    assert lines == [
        "Enter: app.main",
        "    Enter: app.work",
        "    Leave: app.work, Duration: 0.250 us",
        "Leave: app.main, Duration: 1.250 us",
    ]
    assert prof.profile is not None
    assert prof.profile.metadata["lines_dropped"] == 0
    assert prof.profile.metadata["udp_datagrams_sent"] == 1


def test_text_sink_to_a_file(tmp_path: object) -> None:
    from pathlib import Path

    path = Path(str(tmp_path)) / "events.txt"
    clock = FakeClock()
    prof = EltProfiler(Settings(stream=str(path), unit="ns"), clock=clock, standalone=False)
    d = FakeDriver(prof, clock)
    d.leaf("app.work", 42)
    prof.shutdown()
    assert path.read_text() == "Enter: app.work\nLeave: app.work, Duration: 42 ns\n"
    TextSink("stderr").close()  # never closes the real stderr
