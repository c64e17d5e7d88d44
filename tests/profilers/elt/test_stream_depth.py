"""Issue #22 item 6, the live stream: event lines were indented four spaces per level with
no bound, so a recursion N deep streamed O(N²) bytes (8,000 deep: 32 KB lines, ~256 MB).
The indent now stops at MAX_INDENT_LEVELS, one level past the monitor's deepest account,
so the stream is linear in its events and the monitor reads it as before.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from profkit.monitor.functions import MAX_DEPTH
from profkit.profilers.elt import native
from profkit.profilers.elt.lines import MAX_INDENT_LEVELS

_DEPTH = 1500
_PROGRAM = f"""
import sys
sys.setrecursionlimit(10_000)

def f(n):
    return 0 if n == 0 else f(n - 1) + 1

print(f({_DEPTH}))
"""


def test_the_cap_is_past_the_monitors_deepest_account() -> None:
    # deeper lines all read as MAX_INDENT_LEVELS > MAX_DEPTH: no self time, as before
    assert MAX_INDENT_LEVELS == MAX_DEPTH + 1


@pytest.mark.parametrize("native_mode", ["auto", "off"])
@pytest.mark.parametrize("basetime", [None, "1ns"])
def test_a_deep_recursion_streams_lines_of_bounded_indent(
    tmp_path: Path, native_mode: str, basetime: str | None
) -> None:
    if native_mode == "auto" and not native.available():
        pytest.skip("the native recorder is not built")
    (tmp_path / "deep.py").write_text(_PROGRAM)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROFKIT_")}
    env["PROFKIT_NATIVE"] = native_mode
    flags = ["--basetime", basetime] if basetime else []
    cmd = [sys.executable, "-m", "profkit", "run", "--no-tree", "--stream", "events.txt"]
    done = subprocess.run(
        [*cmd, *flags, "-o", "p.json", "deep.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{_DEPTH}\n"
    lines = [ln for ln in (tmp_path / "events.txt").read_text().splitlines() if "__main__.f" in ln]
    if basetime is None:
        assert len(lines) == 2 * (_DEPTH + 1)  # every Enter and Leave of f is there
    indents = [len(ln) - len(ln.lstrip(" ")) for ln in lines]
    assert max(indents) == 4 * MAX_INDENT_LEVELS
    assert indents.count(4 * MAX_INDENT_LEVELS) > 2  # the lines deeper than the cap
    # above the cap, the indent still says the depth: f's outermost call sits under
    # <module>, one level in, and each call one more
    opens = [i for ln, i in zip(lines, indents, strict=True) if "Enter: " in ln]
    assert opens[:5] == [4, 8, 12, 16, 20]
