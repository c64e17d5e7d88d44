"""The receive loop on a real loopback socket, and the listen-address rules."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from profkit.cli.monitor import listen_address
from profkit.errors import UsageError
from profkit.monitor.core import Monitor
from profkit.monitor.server import is_loopback, is_wildcard, open_socket, parse_listen, serve
from profkit.monitor.view import PlainView
from profkit.wire.udp import encode
from tests.monitor.test_core import LINES, _Out


@pytest.mark.parametrize("recvmmsg", [True, False])
def test_serve_receives_counts_and_prints(recvmmsg: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    if not recvmmsg:
        monkeypatch.setenv("PROFKIT_NO_RECVMMSG", "1")
    sock = open_socket("127.0.0.1", 0)
    port = sock.getsockname()[1]
    monitor = Monitor()
    out = _Out()
    stop = threading.Event()
    view = PlainView(out)  # type: ignore[arg-type]
    thread = threading.Thread(
        target=serve,
        args=(sock, monitor, view),
        kwargs={"stop": stop, "refresh": 0.01, "idle_timeout": 0.01},
    )
    thread.start()
    sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for seq in (0, 1, 2, 4):
        sender.sendto(encode("h/9", seq, 0, LINES), ("127.0.0.1", port))
    sender.sendto(b"not ours", ("127.0.0.1", port))
    deadline = time.monotonic() + 60  # a bound against hanging, not a timing assertion
    while monitor.totals().received < 4 or monitor.malformed < 1:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    stop.set()
    thread.join(5)
    view.close(monitor)  # flush what the last tick did not (no sleep to hope for one)
    sock.close()
    sender.close()
    t = monitor.totals()
    assert (t.received, t.lines, t.lost, monitor.malformed) == (4, 20, 1, 1)
    assert out.text.count("Enter: myapp.main") == 4


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("127.0.0.1:2222", ("127.0.0.1", 2222)),
        ("[::1]:9", ("::1", 9)),
        (":7", ("127.0.0.1", 7)),
        ("2223", ("127.0.0.1", 2223)),
        ("localhost:5", ("localhost", 5)),
        ("127.0.0.1:0", ("127.0.0.1", 0)),
    ],  # 0: the kernel picks a free port
)
def test_parse_listen(text: str, expected: tuple[str, int]) -> None:
    assert parse_listen(text) == expected


@pytest.mark.parametrize("text", ["host:", "h:-1", "h:70000", "h:²", "h:x"])
def test_parse_listen_rejects(text: str) -> None:
    with pytest.raises(UsageError):
        parse_listen(text)


def test_loopback_detection() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.0.2.1")


def test_port_in_use_is_a_usage_error() -> None:
    sock = open_socket("127.0.0.1", 0)
    try:
        with pytest.raises(UsageError, match="cannot listen"):
            open_socket("127.0.0.1", sock.getsockname()[1])
    finally:
        sock.close()


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "*", "", "0", "0x0", "::0", "::ffff:0.0.0.0"])
def test_wildcards_are_judged_on_the_parsed_address(host: str) -> None:
    assert is_wildcard(host)


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "192.0.2.7", "localhost"])
def test_specific_addresses_are_not_wildcards(host: str) -> None:
    assert not is_wildcard(host)


@pytest.mark.parametrize("listen", ["0:2222", "0x0:2222", "[::0]:2222", "[::ffff:0.0.0.0]:2222"])
def test_wildcard_spellings_need_allow_remote(listen: str) -> None:
    # issue #17: these bound every interface without --allow-remote
    with pytest.raises(UsageError, match="--allow-remote"):
        listen_address(listen, False)
    assert listen_address(listen, True)[1] == 2222


def test_analysis_is_shed_only_while_behind() -> None:
    from profkit.monitor.server import BEHIND, MAX_STRIDE, _stride

    assert _stride(1, 0.0) == 1
    assert _stride(4, BEHIND / 2) == 1  # the queue emptied recently: all analysed again
    strides = [1]
    for _ in range(8):
        strides.append(_stride(strides[-1], BEHIND))
    assert strides == [1, 2, 4, 8, 16, 16, 16, 16, 16] and MAX_STRIDE == 16


def test_analysis_is_shed_by_queue_fill_with_hysteresis() -> None:
    from profkit.monitor.server import BEHIND, _stride_by_fill

    assert _stride_by_fill(1, 0.05, 1.0) == 1
    assert _stride_by_fill(1, 0.6, BEHIND / 2) == 1  # a burst the buffer is there for
    assert _stride_by_fill(1, 0.95, 0.0) == 2  # nearly full: shed at once
    assert _stride_by_fill(1, 0.6, BEHIND) == 2 and _stride_by_fill(8, 0.9, BEHIND) == 16
    assert _stride_by_fill(16, 0.9, BEHIND) == 16
    assert _stride_by_fill(4, 0.2, BEHIND) == 4  # between the marks: as it was
    assert _stride_by_fill(4, 0.05, BEHIND) == 1


def test_queue_fill_reports_the_kernel_queue() -> None:
    import sys

    from profkit.monitor.receive import queue_fill

    sock = open_socket("127.0.0.1", 0)
    fill = queue_fill(sock)
    if fill is None:
        assert not sys.platform.startswith("linux")
        pytest.skip("SO_MEMINFO is Linux's")
    assert fill() == 0.0
    sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sender.sendto(b"x" * 60_000, sock.getsockname())
    deadline = time.monotonic() + 60  # a bound against hanging, not a timing assertion
    while fill() == 0.0:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert 0.0 < fill() < 1.0
    sender.close()
    sock.close()


def test_serve_acknowledges_and_a_sender_keeps_to_the_window() -> None:
    from profkit.profilers.elt.sinks import UdpSender
    from profkit.wire.udp import MAX_LOOPBACK_DATAGRAM, MIN_WINDOW

    sock = open_socket("127.0.0.1", 0)
    monitor = Monitor()
    stop = threading.Event()
    view = PlainView(_Out())  # type: ignore[arg-type]
    thread = threading.Thread(
        target=serve,
        args=(sock, monitor, view),
        kwargs={"stop": stop, "refresh": 0.01, "idle_timeout": 0.01},
    )
    thread.start()
    sender = UdpSender(sock.getsockname(), sender="h/ack")
    # Issue #22 item 16: on a loaded machine the monitor thread went more than STALL (2 s)
    # without acknowledging, the sender then stopped flow control (as it should for a
    # monitor that went away: tests/profilers/elt/test_sinks.py covers that) and the window
    # this test is about was no longer kept: loss, or a None window. Here the monitor is
    # known to be alive, so the stall fallback is put out of a loaded machine's reach.
    sender.STALL = 3600.0  # type: ignore[misc]
    # 12 MB: more than the window of any receive buffer (4 MB from an 8 MB one)
    lines = [f"    Leave: app.f{i}, Duration: 1.000 us" for i in range(300_000)]
    deadline = time.monotonic() + 600  # a bound against hanging, not a timing assertion
    sender.write_lines(lines[:10])
    while sender.window is None:  # the monitor's first acknowledgement
        assert time.monotonic() < deadline
        time.sleep(0.01)
        sender.pump()
    assert sender.window >= MIN_WINDOW
    sender.write_lines(lines[10:])
    while not sender.ready():
        # the window, and one probe datagram when no acknowledgement came for a while
        assert sender.in_flight <= sender.window + MAX_LOOPBACK_DATAGRAM
        assert time.monotonic() < deadline
        sender.wait(0.01)
        sender.pump()
    while sender.acked < sender.seq:  # every datagram taken and acknowledged
        assert time.monotonic() < deadline
        sender.wait(0.01)
        sender.pump()
    stop.set()
    thread.join(5)
    sender.close()
    sock.close()
    t = monitor.totals()
    assert (t.lines, t.lost, t.dropped) == (len(lines), 0, 0)
    assert sender.acks > 1


def test_receive_buffer_is_at_least_what_rmem_max_allows() -> None:
    from profkit.monitor.server import _rmem_max, receive_buffer

    sock = open_socket("127.0.0.1", 0)
    limit = _rmem_max()
    if not limit:
        pytest.skip("net.core.rmem_max is not readable here")
    assert receive_buffer(sock) >= min(limit, 1 << 30)  # Linux reports twice the value set
    sock.close()


class _BlockedOut:
    """An output whose writes wait until released (a terminal nobody scrolls)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.writing = threading.Event()
        self.text = ""

    def write(self, text: str) -> int:
        self.writing.set()
        self.release.wait(60)
        self.text += text
        return len(text)

    def flush(self) -> None:
        pass


def test_slow_output_never_stops_the_receiving() -> None:
    sock = open_socket("127.0.0.1", 0)
    port = sock.getsockname()[1]
    monitor = Monitor()
    out = _BlockedOut()
    view = PlainView(out, limit=200)  # type: ignore[arg-type]
    stop = threading.Event()
    thread = threading.Thread(
        target=serve,
        args=(sock, monitor, view),
        kwargs={"stop": stop, "refresh": 0.01, "idle_timeout": 0.01},
    )
    thread.start()
    sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sender.sendto(encode("h/1", 0, 0, LINES), ("127.0.0.1", port))
    assert out.writing.wait(60)  # the display thread is stuck in its write
    for seq in range(1, 50):
        sender.sendto(encode("h/1", seq, 0, LINES), ("127.0.0.1", port))
    deadline = time.monotonic() + 60  # a bound against hanging, not a timing assertion
    while monitor.totals().received < 50:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert monitor.unprinted > 0  # beyond the view's limit: counted, not buffered
    out.release.set()
    stop.set()
    thread.join(60)
    view.close(monitor)
    sock.close()
    sender.close()
    assert not thread.is_alive()
    printed = out.text.count("\n")
    assert printed + monitor.unprinted == 50 * len(LINES)


def test_a_write_error_ends_serve_with_the_error() -> None:
    class Broken:
        def write(self, text: str) -> int:
            raise OSError(28, "No space left on device")

        def flush(self) -> None:
            pass

    sock = open_socket("127.0.0.1", 0)
    monitor = Monitor()
    view = PlainView(Broken())  # type: ignore[arg-type]
    sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sender.sendto(encode("h/1", 0, 0, LINES), sock.getsockname())
    with pytest.raises(OSError, match="No space"):
        serve(sock, monitor, view, refresh=0.01, idle_timeout=0.01)  # no stop: the error ends it
    sock.close()
    sender.close()


def test_a_write_blocked_for_good_does_not_keep_serve_from_ending(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from profkit.monitor import server

    monkeypatch.setattr(server, "DISPLAY_JOIN", 0.05)
    sock = open_socket("127.0.0.1", 0)
    monitor = Monitor()
    out = _BlockedOut()  # never released during serve
    view = PlainView(out)  # type: ignore[arg-type]
    stop = threading.Event()
    thread = threading.Thread(
        target=serve,
        args=(sock, monitor, view),
        kwargs={"stop": stop, "refresh": 0.01, "idle_timeout": 0.01},
    )
    thread.start()
    sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sender.sendto(encode("h/1", 0, 0, LINES), sock.getsockname())
    assert out.writing.wait(60)
    stop.set()
    thread.join(60)  # a bound against hanging, not a timing assertion
    assert not thread.is_alive()
    out.release.set()
    sock.close()
    sender.close()
