"""A new user's finding N24: a program that replaces itself (``os.execv``, as autoreloaders
do) or leaves through ``os._exit`` lost its profile silently in trace and memory mode. The
oracle is the bare program: its stdout and exit status must stay the same; the profile
before the exec (or the ``_exit``) must be saved and named."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from profkit.calltree import file as profile_file

RUN = [sys.executable, "-m", "profkit", "run", "--no-tree"]

REEXEC = textwrap.dedent(
    """
    import os, sys

    def first_image():  # (allocates enough for memory mode's sampling to see it)
        return len([bytearray(100_000) for _ in range(200)])

    def second_image():
        return len([bytearray(100_000) for _ in range(200)])

    if os.environ.get("REEXEC_DONE") != "1":
        print("first", first_image(), os.getpid(), flush=True)
        os.environ["REEXEC_DONE"] = "1"
        os.execv(sys.executable, [sys.executable, os.path.abspath(__file__)])
    print("second", second_image(), os.getpid(), flush=True)
    sys.exit(6)
    """
)


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PROFKIT_", "REEXEC_"))}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _run(cmd: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=120)


def _names(path: Path) -> set[str]:
    return {f.name for f in profile_file.load(path).frames}


@pytest.mark.parametrize("mode", ["trace", "memory"])
def test_a_program_that_execs_itself_keeps_both_images_profiles(tmp_path: Path, mode: str) -> None:
    (tmp_path / "reexec.py").write_text(REEXEC)
    bare = _run([sys.executable, "reexec.py"], tmp_path)
    done = _run([*RUN, "--mode", mode, "-o", "rx.json", "reexec.py"], tmp_path)
    assert done.returncode == bare.returncode == 6, done.stderr
    assert [w for line in done.stdout.splitlines() for w in line.split()[:2]] == [
        w for line in bare.stdout.splitlines() for w in line.split()[:2]
    ]
    pid = done.stdout.split()[2]
    assert "__main__.first_image" in _names(tmp_path / "rx.json"), done.stderr
    assert "profile saved to rx.json" in done.stderr
    assert f"rx.{pid}.json" in done.stderr  # where the new image's profile went
    follow = tmp_path / f"rx.{pid}.json"
    assert follow.exists(), done.stderr
    assert "__main__.second_image" in _names(follow)
    assert "__main__.first_image" not in _names(follow)


def test_os_exit_saves_the_profile_and_keeps_the_status(tmp_path: Path) -> None:
    code = "import os; sum(range(10**5)); print('out', flush=True); os._exit(5)"
    bare = _run([sys.executable, "-c", code], tmp_path)
    done = _run([*RUN, "-o", "ox.json", "-c", code], tmp_path)
    assert done.returncode == bare.returncode == 5, done.stderr
    assert done.stdout == bare.stdout
    assert "builtins.sum" in _names(tmp_path / "ox.json")
    assert "profile saved to ox.json" in done.stderr


def test_os_exit_from_a_thread_says_the_profile_was_not_saved(tmp_path: Path) -> None:
    code = "import os, threading; t = threading.Thread(target=os._exit, args=(4,)); t.start(); t.join()"
    done = _run([*RUN, "-o", "t.json", "-c", code], tmp_path)
    assert done.returncode == 4
    assert "os._exit from a thread: its profile was not saved" in done.stderr
    assert not (tmp_path / "t.json").exists()


def test_a_failed_exec_leaves_the_program_running_and_says_so(tmp_path: Path) -> None:
    code = textwrap.dedent(
        """
        import os
        try:
            os.execv("/nonexistent/prog", ["prog"])
        except OSError as exc:
            print("failed", type(exc).__name__)
        assert os.execv.__name__ == "execv"
        """
    )
    bare = _run([sys.executable, "-c", code], tmp_path)
    done = _run([*RUN, "-o", "f.json", "-c", code], tmp_path)
    assert done.returncode == bare.returncode == 0, done.stderr
    assert done.stdout == bare.stdout == "failed FileNotFoundError\n"
    assert done.stderr.count("profile saved to f.json") == 1
    assert "os.execv call failed" in done.stderr
    assert (tmp_path / "f.json").exists()
