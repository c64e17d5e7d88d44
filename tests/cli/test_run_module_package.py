"""``profkit run -m pkg.mod``: pkg's ``__init__`` is the program's code, as under python -m.

It used to run while profkit found the module, before recording: its work was missing
from the profile (``-m pytest`` lost pytest's whole import) and, in sample mode, where the
program runs in a child, it ran twice (its prints came out twice).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from profkit.calltree import file as profile_file


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROFKIT_")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args, cwd=cwd, capture_output=True, text=True, env=_env(), timeout=120, input=""
    )


@pytest.fixture
def package(tmp_path: Path) -> Path:
    pkg = tmp_path / "initpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(
        "import sys\n"
        "def setup_work():\n    return sum(range(1000))\n"
        "setup_work()\n"
        "print('init', sys.argv[0])\n"
    )
    (pkg / "m.py").write_text("import sys\nprint('mod', sys.argv[0].endswith('m.py'))\n")
    (pkg / "__main__.py").write_text("print('main')\n")
    return tmp_path


@pytest.mark.parametrize("mode", ["trace", "sample", "memory"])
@pytest.mark.parametrize("target", ["initpkg.m", "initpkg"])
def test_the_package_runs_once_with_python_s_output(package: Path, mode: str, target: str) -> None:
    python = _run([sys.executable, "-m", target], package)
    out = _run(
        [
            sys.executable,
            "-m",
            "profkit",
            "run",
            "--mode",
            mode,
            "--no-tree",
            "-o",
            "p.json",
            "-m",
            target,
        ],
        package,
    )
    assert out.returncode == python.returncode == 0, out.stderr
    assert out.stdout == python.stdout  # "init -m" once, then the module's line
    assert python.stdout.startswith("init -m\n")


def test_the_package_s_code_is_in_the_profile(package: Path) -> None:
    out = _run(
        [sys.executable, "-m", "profkit", "run", "--no-tree", "-o", "p.json", "-m", "initpkg.m"],
        package,
    )
    assert out.returncode == 0, out.stderr
    profile = profile_file.load(str(package / "p.json"))
    names = {profile.frames[f].name for f in range(len(profile.frames))}
    assert {"initpkg.setup_work", "initpkg.<module>", "initpkg.m.<module>"} <= names, names
    assert not any(n.startswith("profkit.") for n in names), names


def test_a_failing_package_ends_as_under_python(tmp_path: Path) -> None:
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "__init__.py").write_text("raise RuntimeError('boom')\n")
    (tmp_path / "p" / "m.py").write_text("")
    python = _run([sys.executable, "-m", "p.m"], tmp_path)
    out = _run([sys.executable, "-m", "profkit", "run", "--no-tree", "-m", "p.m"], tmp_path)
    assert out.returncode == python.returncode == 1
    assert python.stderr.splitlines()[-1] == "RuntimeError: boom"
    assert "RuntimeError: boom" in out.stderr.splitlines(), out.stderr  # the traceback's end
    assert "profkit: internal error" not in out.stderr


def test_a_missing_submodule_is_still_python_s_one_line(tmp_path: Path) -> None:
    (tmp_path / "q").mkdir()
    (tmp_path / "q" / "__init__.py").write_text("")
    out = _run([sys.executable, "-m", "profkit", "run", "--no-tree", "-m", "q.nosuch"], tmp_path)
    assert out.returncode == 1
    assert out.stderr.strip().splitlines() == ["profkit: error: No module named q.nosuch"]
