"""`profkit top` driven through a pseudo-terminal: its keys work (#25 item 10).

Nothing here depends on timing: each step waits (generously) for the screen to show what
the key asked for, and no share or count is asserted.
"""

from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
import sys
import time

from tests.sampler.conftest import GENERATOR

DEADLINE_S = 60.0


class Screen:
    """The output of a command run on a pty, read as it comes."""

    def __init__(self, argv: list[str]) -> None:
        self.master, slave = pty.openpty()
        self.proc = subprocess.Popen(
            argv, stdin=slave, stdout=slave, stderr=slave, start_new_session=True
        )
        os.close(slave)
        self.text = ""

    def wait_for(self, needle: str, after: int = 0) -> int:
        """Read until ``needle`` appears after offset ``after``; its offset."""
        deadline = time.monotonic() + DEADLINE_S
        while (found := self.text.find(needle, after)) < 0:
            left = deadline - time.monotonic()
            assert left > 0, f"{needle!r} never shown; screen so far:\n{self.text[-2000:]}"
            if select.select([self.master], [], [], min(left, 1.0))[0]:
                try:
                    self.text += os.read(self.master, 65536).decode("utf-8", "replace")
                except OSError:  # the command ended: its pty closed
                    assert needle in self.text[after:], self.text[-2000:]
        return found

    def press(self, key: str) -> None:
        os.write(self.master, key.encode())

    def close(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        os.close(self.master)


def test_keys_sort_pause_and_quit(target) -> None:
    t = target(GENERATOR)
    screen = Screen([sys.executable, "-m", "profkit", "top", str(t.pid), "--refresh", "0.3"])
    try:
        at = screen.wait_for("[sorted by %Own]")
        screen.wait_for("%Own/%Total: share of the last refresh", 0)
        screen.wait_for("keys: 1-4 sort  p pause  q quit", 0)
        screen.press("4")
        at = screen.wait_for("[sorted by TotalTime]", at)
        screen.press("2")
        at = screen.wait_for("[sorted by %Total]", at)
        screen.press("p")
        at = screen.wait_for("[paused]", at)
        screen.press("p")
        screen.wait_for("[sorted by %Total]\r\n", at)  # drawn again, not paused
        screen.press("q")
        assert screen.proc.wait(timeout=DEADLINE_S) == 0
    finally:
        screen.close()
