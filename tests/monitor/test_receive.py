"""Batch receive: recvmmsg through ctypes and the portable recv_into loop agree."""

from __future__ import annotations

import socket
import sys
import time
from collections.abc import Callable

import pytest

from profkit.monitor import receive
from profkit.monitor.server import open_socket
from profkit.wire.udp import MAX_UDP_PAYLOAD


@pytest.fixture(params=["recvmmsg", "loop"])
def make_receiver(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Callable[..., receive.Receiver]:
    if request.param == "recvmmsg":
        if not sys.platform.startswith("linux"):
            pytest.skip("recvmmsg(2) is Linux's")
        monkeypatch.delenv("PROFKIT_NO_RECVMMSG", raising=False)
    else:
        monkeypatch.setenv("PROFKIT_NO_RECVMMSG", "1")
    return receive.receiver


def test_every_datagram_in_order_then_nothing(
    make_receiver: Callable[..., receive.Receiver],
) -> None:
    sock = open_socket("127.0.0.1", 0)
    sock.setblocking(False)
    get = make_receiver(sock, 8)
    assert get() == []
    sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sent = [b"", b"x", *(bytes([65 + i]) * (i * 997) for i in range(20)), b"y" * MAX_UDP_PAYLOAD]
    for data in sent:
        sender.sendto(data, sock.getsockname())
    got: list[bytes] = []
    deadline = time.monotonic() + 60  # a bound against hanging, not a timing assertion
    while len(got) < len(sent):
        assert time.monotonic() < deadline
        batch = get()
        assert len(batch) <= 8
        got.extend(bytes(view) for view in batch)  # copied before the next call
    assert got == sent
    assert get() == []
    sender.close()
    sock.close()


def test_linux_uses_recvmmsg() -> None:
    if not sys.platform.startswith("linux"):
        pytest.skip("recvmmsg(2) is Linux's")
    sock = open_socket("127.0.0.1", 0)
    assert isinstance(receive.receiver(sock), receive._MmsgReceiver)
    sock.close()


def test_sources_and_replies_reach_each_sender(
    make_receiver: Callable[..., receive.Receiver],
) -> None:
    sock = open_socket("127.0.0.1", 0)
    sock.setblocking(False)
    get = make_receiver(sock, 8)
    senders = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(3)]
    for i, s in enumerate(senders):
        s.settimeout(60)  # a bound against hanging, not a timing assertion
        s.sendto(b"from %d" % i, sock.getsockname())
    got: list[tuple[bytes, object]] = []
    deadline = time.monotonic() + 60
    while len(got) < 3:
        assert time.monotonic() < deadline
        batch = get()
        got += zip((bytes(v) for v in batch), get.sources(len(batch)), strict=True)
    for data, source in got:
        get.reply(source, b"ack " + data)
    for i, s in enumerate(senders):
        assert s.recv(100) == b"ack from %d" % i
        s.close()
    sock.close()
