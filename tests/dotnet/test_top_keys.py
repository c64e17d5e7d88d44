"""The .NET `profkit top` driven through a pseudo-terminal: the Python top's keys and
header (#25 item 15). Nothing depends on timing: each step waits (generously) for the
screen to show what the key asked for; no share or count is asserted."""

from __future__ import annotations

import sys

from profkit.dotnet.commands import TopState
from tests.dotnet.conftest import Start
from tests.sampler.test_top_keys import DEADLINE_S, Screen


def test_keys_sort_pause_and_quit(start: Start) -> None:
    proc = start("spin", "240")
    screen = Screen([sys.executable, "-m", "profkit", "top", str(proc.pid), "--refresh", "0.3"])
    try:
        at = screen.wait_for("[sorted by %Own]")
        screen.wait_for("profkit top: pid", 0)
        screen.wait_for("(.NET)", 0)
        screen.wait_for("%Own/%Total: share of the last refresh", 0)
        screen.wait_for("keys: 1-4 sort  p pause  q quit", 0)
        screen.press("3")
        at = screen.wait_for("[sorted by OwnTime]", at)
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
    assert proc.poll() is None  # quitting top leaves the program running


def test_state_has_the_python_tops_keys() -> None:
    from profkit._topkeys import press

    state = TopState()
    assert press(state, "4") and state.sort == 3
    assert press(state, " ") and state.paused
    assert not press(state, "x")
    assert not press(state, "q") and state.quit
