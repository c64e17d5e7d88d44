"""The diagnostics IPC protocol against a fake runtime (a Unix socket served by a thread)."""

from __future__ import annotations

import os
import socket
import struct
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from profkit.dotnet import ipc


def test_collect_tracing_layout() -> None:
    msg = ipc.collect_tracing([ipc.Provider("AB", 0x10, 5)], buffer_mb=64)
    magic, size, cset, cmd, reserved = ipc.HEADER.unpack_from(msg)
    assert (magic, size, cset, cmd, reserved) == (b"DOTNET_IPC_V1\x00", len(msg), 2, 2, 0)
    body = msg[20:]
    assert struct.unpack_from("<III", body) == (64, 1, 1)
    assert struct.unpack_from("<QI", body, 12) == (0x10, 5)
    assert struct.unpack_from("<I", body, 24) == (3,)  # "AB" and its NUL, in UTF-16 units
    assert body[28:34] == "AB\x00".encode("utf-16-le")
    assert body[34:] == b"\x00\x00\x00\x00"  # no filter: length 0, no bytes
    stop = ipc.stop_tracing(7)
    assert stop[16:18] == b"\x02\x01" and struct.unpack_from("<Q", stop, 20) == (7,)


@pytest.fixture
def fake_runtime(tmp_path: Path) -> Iterator[Callable[[bytes], str]]:
    """``serve(reply)`` -> a socket path answering each connection's request with ``reply``."""
    servers: list[socket.socket] = []

    def serve(reply: bytes) -> str:
        path = str(tmp_path / f"dotnet-diagnostic-{os.getpid()}-1-socket")
        srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        srv.bind(path)
        srv.listen(4)
        servers.append(srv)

        def loop() -> None:
            while True:
                try:
                    conn, _ = srv.accept()
                except OSError:
                    return
                with conn:
                    conn.recv(65536)
                    conn.sendall(reply)

        threading.Thread(target=loop, daemon=True).start()
        return path

    yield serve
    for srv in servers:
        srv.close()


def _reply(command: int, payload: bytes) -> bytes:
    return ipc.HEADER.pack(ipc.MAGIC, 20 + len(payload), 0xFF, command, 0) + payload


def test_ok_reply_gives_the_session_id(fake_runtime: Callable[[bytes], str]) -> None:
    path = fake_runtime(_reply(0x00, struct.pack("<Q", 1234)) + b"Nettrace")
    sock, sid = ipc.start_session(path, [ipc.Provider("P", 1)])
    with sock:
        assert sid == 1234
        assert sock.recv(8) == b"Nettrace"  # the stream follows on the same connection


@pytest.mark.parametrize(
    ("code", "words"),
    [
        (0x80131385, "does not know this command"),
        (0x80070057, "invalid argument"),
        (0x12345678, "refused"),
    ],
)
def test_error_reply_is_one_clear_line(
    fake_runtime: Callable[[bytes], str], code: int, words: str
) -> None:
    path = fake_runtime(_reply(0xFF, struct.pack("<I", code)))
    with pytest.raises(ipc.DiagnosticsError) as err:
        ipc.start_session(path, [ipc.Provider("P", 1)])
    text = str(err.value)
    assert words in text and f"0x{code:08X}" in text and "\n" not in text


@pytest.mark.parametrize("reply", [b"", b"garbage" * 5, _reply(0x00, b"")[:10]])
def test_bad_replies(fake_runtime: Callable[[bytes], str], reply: bytes) -> None:
    path = fake_runtime(reply)
    with pytest.raises(ipc.DiagnosticsError):
        ipc.start_session(path, [ipc.Provider("P", 1)])


def test_connecting_nowhere(tmp_path: Path) -> None:
    with pytest.raises(ipc.DiagnosticsError, match="cannot connect"):
        ipc.connect(str(tmp_path / "absent"))
    ipc.stop_session(str(tmp_path / "absent"), 1)  # a gone target is not an error


def test_find_socket_picks_the_newest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pid = os.getpid()
    for key in (5, 90, 17):
        (tmp_path / f"dotnet-diagnostic-{pid}-{key}-socket").touch()
    (tmp_path / f"dotnet-diagnostic-{pid + 1}-99-socket").touch()
    monkeypatch.setattr(ipc, "target_tmpdir", lambda _pid: str(tmp_path))
    monkeypatch.setattr(ipc, "_start_ticks", lambda _pid: None)  # start time unreadable
    found = ipc.find_socket(pid)
    assert found is not None and found.endswith(f"-{pid}-90-socket")
    assert ipc.find_socket(pid + 2) is None
    # readable: the key must be the process's start time (others are dead processes')
    monkeypatch.setattr(ipc, "_start_ticks", lambda _pid: 17)
    found = ipc.find_socket(pid)
    assert found is not None and found.endswith(f"-{pid}-17-socket")
