"""Forked children in collector tests: wait for one, but never hang the suite on it."""

from __future__ import annotations

import os
import signal
import time


def wait_or_kill(pid: int, within: float) -> int | None:
    """The child's exit code, or None if it did not exit ``within`` seconds (then it is
    killed: a deadlocked child fails its test instead of hanging the run)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.01)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return None
