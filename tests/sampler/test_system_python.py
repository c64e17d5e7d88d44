"""The machine's own ``/usr/bin/python3`` (Debian 12: 3.11.2, a release profkit measured
only because it is here; Ubuntu 24.04: 3.12.3, one it did not): ``dump``, ``attach`` and
``run --mode sample`` read it as py-spy does. Skips, saying why, where there is none or it
is not a 3.11-3.13 CPython.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import profkit
from profkit.calltree.file import load
from tests.sampler.conftest import SLEEPER
from tests.sampler.conftest import Target as Program

SYSTEM = "/usr/bin/python3"


def _system_python() -> str:
    if not os.path.exists(SYSTEM):
        pytest.skip(f"no {SYSTEM} on this machine")
    out = subprocess.run(
        [SYSTEM, "-c", "import sys; print(sys.implementation.name, *sys.version_info[:2])"],
        capture_output=True,
        text=True,
        timeout=30,
    ).stdout.split()
    if out[:1] != ["cpython"] or (int(out[1]), int(out[2])) not in ((3, 11), (3, 12), (3, 13)):
        pytest.skip(f"{SYSTEM} is {' '.join(out)}, not CPython 3.11-3.13")
    return SYSTEM


def _profkit(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "profkit", *args],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def _py_spy() -> str | None:
    here = Path(sys.executable).with_name("py-spy")
    return str(here) if here.exists() else shutil.which("py-spy")


def _dump_threads(text: str) -> dict[int, list[str]]:
    """profkit dump's text: native thread id → frame names, innermost first."""
    threads: dict[int, list[str]] = {}
    current: list[str] = []
    for line in text.splitlines():
        head = re.match(r"Thread (\d+) ", line)
        if head:
            current = threads.setdefault(int(head.group(1)), [])
        elif line.startswith("    "):
            current.append(line.strip().split(" (")[0])
    return threads


@pytest.fixture
def sleeper(tmp_path: Path):
    program = Program(_system_python(), SLEEPER, tmp_path)
    yield program
    program.stop()


def test_dump_reads_the_system_python_as_py_spy_does(sleeper):
    r = _profkit("dump", str(sleeper.pid))
    assert r.returncode == 0, r.stderr
    ours = _dump_threads(r.stdout)
    assert len(ours) == 2
    assert ours[sleeper.pid][:2] == ["__main__.main", "__main__.<module>"]
    spy = _py_spy()
    if spy is None:
        pytest.skip("py-spy is not installed: the oracle half is not run")
    got = subprocess.run(
        [spy, "dump", "--pid", str(sleeper.pid), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if got.returncode != 0:
        pytest.skip(f"py-spy cannot read the target here: {got.stderr.strip()[:200]}")
    for thread in json.loads(got.stdout):
        names = [f["name"] for f in thread["frames"]]
        mine = ours[thread["os_thread_id"]]
        assert len(mine) == len(names), (mine, names)
        for own, theirs in zip(mine, names, strict=True):
            assert own == theirs or own.endswith("." + theirs), (mine, names)


SPIN = """
import time
def leaf(n):
    s = 0
    for i in range(n):
        s += i * i
    return s
def spin(seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        leaf(10_000)
print("ready", flush=True)
spin(float(__import__("sys").argv[1]))
raise SystemExit(3)
"""


def test_attach_profiles_the_system_python(tmp_path: Path):
    program = Program(_system_python(), SPIN, tmp_path, ("30",))
    try:
        out = tmp_path / "a.json"
        r = _profkit("attach", str(program.pid), "-d", "1", "-o", str(out))
        assert r.returncode == 0, r.stderr
    finally:
        program.stop()
    profile = load(out)
    assert {"__main__.leaf", "__main__.spin", "__main__.<module>"} <= {
        f.name for f in profile.frames
    }
    assert profile.metadata["sampler"]["layout"] in ("own", "3.11.7", "3.12.1", "3.12.1, checked")


def test_run_mode_sample_on_the_system_python(tmp_path: Path):
    """profkit itself on the system interpreter (its source tree on the path)."""
    python = _system_python()
    script = tmp_path / "spin.py"
    script.write_text(SPIN)
    out = tmp_path / "r.json"
    env = dict(os.environ, PYTHONPATH=str(Path(profkit.__file__).resolve().parents[1]))
    started = time.monotonic()
    r = subprocess.run(
        [python, "-m", "profkit", "run", "--mode", "sample", "-o", str(out), str(script), "1"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    assert r.returncode == 3, r.stderr  # the program's own exit status
    assert r.stdout == "ready\n"
    assert "using InProcessEngine" not in r.stderr, r.stderr
    assert time.monotonic() - started < 60
    profile = load(out)
    assert profile.mode == "sample"
    assert {"__main__.leaf", "__main__.spin"} <= {f.name for f in profile.frames}
