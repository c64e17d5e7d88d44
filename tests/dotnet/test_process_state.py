"""Issue #22 item 15: the message for a PID whose ``/proc`` state is ``Z`` says which of
two things it is. A process whose main thread alone ended (``pthread_exit``) shows a
zombie leader while its other threads run: "the process has exited (a zombie)" misled.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from profkit.dotnet.process import NoSuchProcess, check_alive

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc")

_MAIN_THREAD_EXITS = """
import ctypes, os, threading, time
threading.Thread(target=lambda: time.sleep(300)).start()
print(os.getpid(), flush=True)
ctypes.CDLL(None).pthread_exit(None)
"""


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rpartition(")")[2].split()[0]
    except OSError:
        return ""


def _wait_for_zombie(pid: int) -> None:
    deadline = time.monotonic() + 60  # a wait for a state, not a timing assertion
    while _state(pid) != "Z":
        if time.monotonic() > deadline:
            pytest.skip("the process never showed a zombie leader")
        time.sleep(0.02)


def test_a_process_whose_main_thread_exited_is_not_called_exited() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", _MAIN_THREAD_EXITS], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        pid = int(proc.stdout.readline())
        _wait_for_zombie(pid)
        with pytest.raises(NoSuchProcess) as caught:
            check_alive(pid)
        text = str(caught.value)
        assert "main thread has exited while 1 other thread(s) still run" in text
        assert "the process has exited" not in text
    finally:
        proc.kill()
        proc.wait()


def test_a_real_zombie_names_the_parent_that_has_not_waited() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        _wait_for_zombie(proc.pid)
        with pytest.raises(NoSuchProcess) as caught:
            check_alive(proc.pid)
        assert str(caught.value) == (
            f"pid {proc.pid}: the process has exited; it is a zombie until its parent "
            f"(pid {os.getpid()}) waits for it"
        )
    finally:
        proc.wait()
