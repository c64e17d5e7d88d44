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
    assert "_mmsg_receiver" in receive.receiver(sock).__qualname__
    sock.close()
