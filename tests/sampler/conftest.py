"""Targets for the out-of-process sampler tests: real Python processes on 3.11-3.13.

Each target prints ``ready`` once it is inside the code under test, so a test samples
the program's steady state, not its start-up. Targets run on profkit's own interpreter
and on pyenv's 3.11.7 / 3.12.1 / 3.13.0 where installed (others skip, saying why).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from profkit.sampler.procinfo import read_maps

PYENV_ROOT = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
VERSIONS = {
    "3.11": f"{PYENV_ROOT}/versions/3.11.7/bin/python3.11",
    "3.12": f"{PYENV_ROOT}/versions/3.12.1/bin/python3.12",
    "3.13": f"{PYENV_ROOT}/versions/3.13.0/bin/python3.13",
}


def _can_read_self_child() -> str | None:
    """None when this machine lets us read a child's memory, else why not."""
    if not sys.platform.startswith("linux"):
        return "Linux only"
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; print(1, flush=True); time.sleep(5)"],
        stdout=subprocess.PIPE,
    )
    try:
        from profkit.sampler.memory import Memory

        assert child.stdout is not None
        child.stdout.readline()
        maps = read_maps(child.pid)
        Memory(child.pid).read(maps[0].start, 8)
    except Exception as exc:
        return f"cannot read another process's memory here: {exc}"
    finally:
        child.kill()
        child.wait()
        if child.stdout is not None:
            child.stdout.close()
    return None


#: Every 3.11+ release can be read (measured, assumed from its minor's layout, or published).
_REASON = _can_read_self_child()


@pytest.fixture(scope="session", autouse=True)
def _needs_process_vm_readv() -> None:
    if _REASON is not None:
        pytest.skip(_REASON)


def interpreter(version: str) -> str:
    """The pyenv interpreter for ``version`` or a skip saying it is not installed."""
    path = VERSIONS[version]
    if not os.path.exists(path):
        pytest.skip(f"CPython {version} is not installed at {path}")
    return path


def all_targets() -> list[str]:
    return list(VERSIONS)


class Target:
    """A running Python program; ``pid``, and ``stop()`` (also at teardown)."""

    def __init__(self, python: str, source: str, tmp: Path, args: tuple[str, ...] = ()):
        self.script = tmp / "target.py"
        self.script.write_text(textwrap.dedent(source))
        self.proc = subprocess.Popen(
            [python, str(self.script), *args],
            stdout=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            cwd=str(tmp),
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if line.strip() != "ready":
            self.stop()
            raise AssertionError(f"target did not start: {line!r}")
        self.pid = self.proc.pid

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


@pytest.fixture
def target(tmp_path: Path) -> Iterator[object]:
    """``target(source, python=sys.executable)`` starts a program; all stop at teardown."""
    started: list[Target] = []

    def start(source: str, python: str = sys.executable, args: tuple[str, ...] = ()) -> Target:
        t = Target(python, source, tmp_path / f"t{len(started)}" if started else tmp_path, args)
        started.append(t)
        return t

    (tmp_path / "t1").mkdir()
    (tmp_path / "t2").mkdir()
    yield start
    for t in started:
        t.stop()


GENERATOR = """
import sys
def gen(n):
    for i in range(n):
        yield i
def main():
    print("ready", flush=True)
    while True:
        t = 0
        for v in gen(6_000_000):
            t += v
main()
"""

SLEEPER = """
import threading, time
def napping():
    time.sleep(600)
def worker():
    napping()
threading.Thread(target=worker, name="napper", daemon=True).start()
def main():
    print("ready", flush=True)
    time.sleep(600)
main()
"""
