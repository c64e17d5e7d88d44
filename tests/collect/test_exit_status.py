"""A profiled process ends as the bare one does (issue 22, item 11).

Under environment activation the profile is saved (and the tree printed) from an
``atexit`` handler. A program ended by Ctrl-C must still die of SIGINT after it, as python
does once its exit handlers have run: the save used to import modules that ``exec`` a
string (``namedtuple``), which made CPython forget the Ctrl-C, and the process exited 1.
The Ctrl-C here is the program's own ``os.kill``: no timing, no terminal.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

CTRL_C = """\
import atexit, os, signal
atexit.register(lambda: print("the program's exit handler", flush=True))
def work():
    os.kill(os.getpid(), signal.SIGINT)
    signal.pause()  # not reached: the KeyboardInterrupt comes first
work()
"""


def _run(cmd: list[str], cwd: Path, extra: dict[str, str]) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROFKIT_")}
    return subprocess.run(
        cmd, cwd=cwd, env=env | extra, capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize("profiler", ["elt", "elt-sample"])
@pytest.mark.parametrize("tree", ["1", "0"])
def test_ctrl_c_under_environment_activation_dies_of_sigint(
    profiler: str, tree: str, tmp_path: Path
) -> None:
    (tmp_path / "ctrl_c.py").write_text(CTRL_C)
    bare = _run([sys.executable, "ctrl_c.py"], tmp_path, {})
    env = {
        "PROFKIT_ENABLE_PROFILING": "1",
        "PROFKIT_PROFILER": profiler,
        "PROFKIT_TREE": tree,
        "PROFKIT_OUTPUT": "out.json",
    }
    profiled = _run([sys.executable, "ctrl_c.py"], tmp_path, env)
    assert bare.returncode == -signal.SIGINT
    assert profiled.returncode == bare.returncode, profiled.stderr[-2000:]
    assert profiled.stdout == bare.stdout == "the program's exit handler\n"
    assert "KeyboardInterrupt" in profiled.stderr
    assert (tmp_path / "out.json").exists()
    if tree == "1":
        assert "profile saved to" in profiled.stderr


def test_a_program_ending_normally_after_a_caught_ctrl_c_exits_0(tmp_path: Path) -> None:
    """Only an *uncaught* Ctrl-C makes the process die of SIGINT."""
    code = "try:\n    raise KeyboardInterrupt\nexcept KeyboardInterrupt:\n    print('caught')\n"
    (tmp_path / "caught.py").write_text(code)
    env = {"PROFKIT_ENABLE_PROFILING": "1", "PROFKIT_PROFILER": "elt", "PROFKIT_OUTPUT": "o.json"}
    profiled = _run([sys.executable, "caught.py"], tmp_path, env)
    assert (profiled.returncode, profiled.stdout) == (0, "caught\n"), profiled.stderr
