"""``profkit run`` honours ``PROFKIT_BACKEND`` (as its children always did), the saved
profile names the backend that ran, and a name that cannot run is refused up front."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from profkit.api import EventMask
from profkit.calltree import file as profile_file
from profkit.collect import backends, select

PROGRAM = "def f(n):\n    return n if n < 2 else f(n - 1) + f(n - 2)\nprint(f(10))\n"


def _run(tmp: Path, backend: str | None, *options: str) -> subprocess.CompletedProcess[str]:
    (tmp / "prog.py").write_text(PROGRAM)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROFKIT_")}
    if backend is not None:
        env["PROFKIT_BACKEND"] = backend
    cmd = [sys.executable, "-m", "profkit", "run", "--no-tree", *options, "-o", "out.json"]
    return subprocess.run(
        [*cmd, "prog.py"], cwd=tmp, env=env, capture_output=True, text=True, timeout=120
    )


def _ran(tmp: Path) -> object:
    return profile_file.load(tmp / "out.json").metadata.get("backend")


@pytest.mark.parametrize(
    "backend", [b for b in ("setprofile", "monitoring") if backends.unavailable(b) is None]
)
def test_the_forced_backend_runs_and_is_named_in_the_profile(backend: str, tmp_path: Path) -> None:
    done = _run(tmp_path, backend)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "55\n"
    assert _ran(tmp_path) == backend


def test_auto_without_c_calls_follows_select(tmp_path: Path) -> None:
    """On 3.11 that is evalframe (no profile function), on 3.12+ monitoring."""
    done = _run(tmp_path, None, "--no-c-calls")
    assert done.returncode == 0, done.stderr
    assert _ran(tmp_path) == select.choose("auto", EventMask.ENTER_LEAVE).name
    if backends.unavailable("evalframe") is None:
        assert _ran(tmp_path) == "evalframe"


@pytest.mark.skipif(backends.unavailable("evalframe") is not None, reason="3.11 only")
def test_evalframe_forced(tmp_path: Path) -> None:
    done = _run(tmp_path, "evalframe", "--no-c-calls")
    assert done.returncode == 0, done.stderr
    assert _ran(tmp_path) == "evalframe"
    names = {f.name for f in profile_file.load(tmp_path / "out.json").frames}
    assert any(name.endswith("f") for name in names)


@pytest.mark.parametrize(
    "backend", ["bogus", *(b for b in backends.NAMES if backends.unavailable(b))]
)
def test_a_backend_that_cannot_run_is_refused_before_the_program(
    backend: str, tmp_path: Path
) -> None:
    done = _run(tmp_path, backend)
    assert done.returncode == 2
    assert done.stdout == ""  # the program never ran
    (line,) = done.stderr.splitlines()
    assert line.startswith("profkit: error: ") and f"PROFKIT_BACKEND={backend}: " in line
    assert not (tmp_path / "out.json").exists()


@pytest.mark.skipif(backends.unavailable("evalframe") is not None, reason="3.11 only")
def test_evalframe_with_c_calls_is_refused_before_the_program(tmp_path: Path) -> None:
    done = _run(tmp_path, "evalframe")
    assert done.returncode == 2 and done.stdout == ""
    assert "PROFKIT_BACKEND=evalframe: it cannot see C calls (add --no-c-calls)" in done.stderr
