"""`profkit monitor` as a real process: live lines, summary on Ctrl-C, loopback default."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time

import pytest

from profkit.cli.main import main
from profkit.cli.monitor import listen_address
from profkit.errors import UsageError
from profkit.monitor.protocol import encode


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(*args: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "profkit", "monitor", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    assert proc.stderr is not None
    line = proc.stderr.readline()  # "listening on ..." once the socket is bound
    assert "listening on udp" in line, line
    return proc


def test_lines_senders_loss_and_ctrl_c_summary() -> None:
    port = _free_port()
    proc = _start("--listen", f"127.0.0.1:{port}", "--plain", "--top", "3")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for seq in (0, 1, 3):
            s.sendto(encode("app/1", seq, 2, ["Enter: m.f", "Leave: m.f, Duration: 5.000 us"]),
                     ("127.0.0.1", port))
        s.sendto(encode("app/2", 0, 0, ["Enter: m.g"]), ("127.0.0.1", port))
        s.sendto(b"\x00garbage", ("127.0.0.1", port))
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    assert out.count("Enter: m.f") == 3
    assert "[app/2] Enter: m.g" in out
    assert "2 senders, 4 datagrams, 7 lines, 1 lost, 1 malformed, 2 dropped at senders" in out
    assert "m.f" in out.split("hottest functions")[1]


def test_sigterm_also_prints_summary() -> None:
    port = _free_port()
    proc = _start("--listen", f"127.0.0.1:{port}", "--quiet")
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=20)
    assert proc.returncode == 0 and "0 senders" in out


def test_duration_stops_by_itself() -> None:
    port = _free_port()
    proc = _start("--listen", f"127.0.0.1:{port}", "--duration", "0.3")
    out, _ = proc.communicate(timeout=20)
    assert proc.returncode == 0 and "profkit monitor: 0 senders" in out


def test_default_is_loopback_and_wildcard_needs_allow_remote() -> None:
    assert listen_address(None, False) == ("127.0.0.1", 2222)
    assert listen_address(None, True) == ("0.0.0.0", 2222)
    with pytest.raises(UsageError, match="--allow-remote"):
        listen_address("0.0.0.0:2222", False)
    with pytest.raises(UsageError, match="--allow-remote"):
        listen_address("[::]:2222", False)
    assert listen_address("0.0.0.0:9", True) == ("0.0.0.0", 9)
    assert listen_address("192.0.2.7:9", False) == ("192.0.2.7", 9)  # a chosen interface


def test_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["monitor", "--listen", "0.0.0.0:2222"]) == 2
    assert "--allow-remote" in capsys.readouterr().err
    assert main(["monitor", "--listen", "nope"]) == 2
    assert "bad --listen" in capsys.readouterr().err
    assert main(["monitor", "--top", "-1"]) == 2


def test_terminal_gets_the_refreshed_screen() -> None:
    pty = pytest.importorskip("pty")
    import os

    port = _free_port()
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "profkit", "monitor", "--listen", f"127.0.0.1:{port}",
         "--duration", "1.5"],
        stdout=follower, stderr=subprocess.PIPE, env={**os.environ, "COLUMNS": "90", "LINES": "30"},
    )
    os.close(follower)
    assert proc.stderr is not None
    assert b"listening on udp" in proc.stderr.readline()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.sendto(encode("tty/1", 0, 0, ["Enter: m.f", "Leave: m.f, Duration: 7 ns"]),
                 ("127.0.0.1", port))
    chunks = []
    while True:
        try:
            data = os.read(leader, 65536)
        except OSError:  # EIO once the process closed its end
            break
        if not data:
            break
        chunks.append(data)
    os.close(leader)
    assert proc.wait(timeout=20) == 0
    proc.stderr.close()
    screen = b"".join(chunks).decode("utf-8", "replace")
    assert "\x1b[H\x1b[2J" in screen
    assert "profkit monitor (Ctrl-C to stop): 1 sender" in screen
    assert "Leave: m.f, Duration: 7 ns" in screen
