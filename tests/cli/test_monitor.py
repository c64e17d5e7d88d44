"""`profkit monitor` as a real process: live lines, summary on Ctrl-C, loopback default."""

from __future__ import annotations

import queue
import re
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Any

import pytest

from profkit.cli.main import main
from profkit.cli.monitor import listen_address
from profkit.errors import UsageError
from profkit.wire.udp import encode


def _start(*args: str) -> tuple[subprocess.Popen[str], int]:
    """Start a monitor on a kernel-chosen port (``--listen 127.0.0.1:0``: no race with
    other tests for a port picked in advance); return it and the port it printed."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "profkit", "monitor", "--listen", "127.0.0.1:0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    line = proc.stderr.readline()  # "listening on ..." once the socket is bound
    assert "listening on udp" in line, line
    return proc, _port(line)


def _port(line: str) -> int:
    match = re.search(r"listening on udp \S+:(\d+)", line)
    assert match is not None, line
    port = int(match.group(1))
    assert port != 0
    return port


class _Reader:
    """Reads a stream line by line in a thread, so a test can wait for a line with a
    deadline (a silent stream cannot hang it) and still get every byte at the end."""

    def __init__(self, stream: Any) -> None:
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        self.thread = threading.Thread(
            target=lambda: [self.lines.put(x) for x in iter(stream.readline, "")], daemon=True
        )
        self.thread.start()

    def wait_for(self, text: str, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while not self.seen or text not in self.seen[-1]:
            self.seen.append(self.lines.get(timeout=max(deadline - time.monotonic(), 0.01)))

    def rest(self) -> str:
        """Everything the stream carried, once it has ended."""
        self.thread.join(20)
        while not self.lines.empty():
            self.seen.append(self.lines.get())
        return "".join(self.seen)


def _interrupt(proc: subprocess.Popen[str], stdout: _Reader) -> tuple[str, str]:
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=20)
    assert proc.stderr is not None
    return stdout.rest(), proc.stderr.read()


def test_lines_senders_loss_and_ctrl_c_summary() -> None:
    proc, port = _start("--plain", "--top", "3")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for seq in (0, 1, 3):
            s.sendto(
                encode("app/1", seq, 2, ["Enter: m.f", "Leave: m.f, Duration: 5.000 us"]),
                ("127.0.0.1", port),
            )
        s.sendto(b"\x00garbage", ("127.0.0.1", port))
        s.sendto(encode("app/2", 0, 0, ["Enter: m.g"]), ("127.0.0.1", port))
    # loopback keeps one socket's datagrams in order: once the last one is printed,
    # every earlier one has been counted (no sleep that a loaded machine could outlast)
    reader = _Reader(proc.stdout)
    reader.wait_for("[app/2] Enter: m.g")
    out, err = _interrupt(proc, reader)
    assert proc.returncode == 0, err
    # exactly once: a KeyboardInterrupt landing in the view's flush printed a batch twice
    assert out.count("Enter: m.f") == 3
    assert "[app/2] Enter: m.g" in out
    assert "2 senders, 4 datagrams, 7 lines, 1 lost, 1 malformed, 2 dropped at senders" in out
    assert "m.f" in out.split("hottest functions")[1]


def test_sigterm_also_prints_summary() -> None:
    proc, _ = _start("--quiet")
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=20)
    assert proc.returncode == 0 and "0 senders" in out


def test_duration_stops_by_itself() -> None:
    proc, _ = _start("--duration", "0.3")
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
    for duration in ("0", "nan", "inf", "1e300"):  # nan was accepted, inf crashed the timer
        assert main(["monitor", "--duration", duration]) == 2
        assert "--duration must be positive seconds" in capsys.readouterr().err


def test_terminal_gets_the_refreshed_screen() -> None:
    pty = pytest.importorskip("pty")
    import os

    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "profkit", "monitor", "--listen", "127.0.0.1:0"],
        stdout=follower,
        stderr=subprocess.PIPE,
        env={**os.environ, "COLUMNS": "90", "LINES": "30"},
    )
    os.close(follower)
    assert proc.stderr is not None
    port = _port(proc.stderr.readline().decode())
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.sendto(
            encode(
                "tty/1",
                0,
                0,
                ["Enter: m.f", "Leave: m.f, Duration: 7 ns", "Enter: evil\x1b]0;title\x07"],
            ),
            ("127.0.0.1", port),
        )
    chunks: list[bytes] = []
    deadline = time.monotonic() + 30
    # read until the screen shows the datagram, however slowly the machine runs; then stop
    while b"Duration: 7 ns" not in b"".join(chunks) and time.monotonic() < deadline:
        if select.select([leader], [], [], 0.1)[0]:
            chunks.append(os.read(leader, 65536))
    proc.send_signal(signal.SIGINT)
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
    # a sender's control characters reach the terminal only as escapes
    assert "\x1b]0;" not in screen and "evil\\x1b]0;title\\x07" in screen


def test_plain_output_to_a_file_keeps_whole_summary_lines() -> None:
    """The summary was cut at 100 columns even when stdout was not a terminal."""
    proc, port = _start("--plain")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.sendto(
            encode("x" * 40 + "/1", 0, 0, [f"Leave: {'m.' * 80}f, Duration: 5 ns"]),
            ("127.0.0.1", port),
        )
    reader = _Reader(proc.stdout)
    reader.wait_for("Leave: m.")
    out, _ = _interrupt(proc, reader)
    assert proc.returncode == 0
    summary = out.split("profkit monitor: ", 1)[1]
    assert "dropped at senders\n" in summary and "m." * 80 + "f\n" in summary
    assert "…" not in summary


def test_stdout_write_error_is_one_line() -> None:
    """A full disk behind `>` was an internal error."""
    import os
    import stat

    if not os.path.exists("/dev/full") or not stat.S_ISCHR(os.stat("/dev/full").st_mode):
        pytest.skip("no /dev/full")
    with open("/dev/full", "wb") as full:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "profkit",
                "monitor",
                "--listen",
                "127.0.0.1:0",
                "--duration",
                "0.2",
            ],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[-1] == (
        "profkit: error: cannot write to stdout: No space left on device"
    )
