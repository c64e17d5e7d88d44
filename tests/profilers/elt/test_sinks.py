"""Event-line sinks: UDP datagrams in the monitor's wire format, drop-and-count, bounded queue."""

from __future__ import annotations

import socket
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


def test_refused_sends_are_dropped_and_counted() -> None:
    sender = UdpSender(("127.0.0.1", 9), sender="s/1")

    real = sender._sock
    waits = []

    class Full:
        def send(self, data: bytes) -> int:
            raise BlockingIOError

        def fileno(self) -> int:  # select() waits on the real socket (writable at once)
            waits.append(1)
            return real.fileno()

        def close(self) -> None:
            pass

    sender._sock = Full()  # type: ignore[assignment]
    sender.write_lines(["a", "b", "c"])
    real.close()
    assert (sender.dropped, sender.socket_dropped, sender.seq) == (3, 3, 0)
    assert waits  # it waited for room before dropping (backpressure on the flusher)


def test_lines_dropped_are_counted_once(receiver: socket.socket) -> None:
    # issue #11: the flusher's drops were counted by the flusher and again by the sender
    sender = UdpSender(receiver.getsockname(), sender="s/3")
    flusher = LineFlusher([sender], max_queued=10)
    for i in range(25):
        flusher.queue.append(str(i))
    flusher.close()
    (gram,) = _receive_all(receiver)
    assert (flusher.dropped, sender.queue_dropped, sender.socket_dropped) == (15, 15, 0)
    assert sender.dropped == gram.dropped == 15
    assert list(gram.lines) == [str(i) for i in range(15, 25)]


def test_dropped_count_reaches_the_monitor(receiver: socket.socket) -> None:
    sender = UdpSender(receiver.getsockname(), sender="s/2")
    sender.add_dropped(7)
    sender.write_lines(["x"])
    sender.close()
    (gram,) = _receive_all(receiver)
    assert gram.dropped == 7


def test_flusher_bounds_its_queue_and_counts() -> None:
    class Keep:
        def __init__(self) -> None:
            self.lines: list[str] = []

        def write_lines(self, lines: list[str]) -> None:
            self.lines += lines

        def close(self) -> None:
            pass

    keep = Keep()
    flusher = LineFlusher([keep], max_queued=10)
    for i in range(25):
        flusher.queue.append(str(i))
    flusher.close()
    assert flusher.dropped == 15
    assert keep.lines == [str(i) for i in range(15, 25)]


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
