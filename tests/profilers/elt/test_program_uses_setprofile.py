"""A new user's finding (notes/s6/findings.md): on 3.11 trace mode rides `sys.setprofile`, so a
program that profiles a piece of itself with cProfile (or anything calling `sys.setprofile`)
silently ends profkit's recording: every call after `Profile.disable()` is missing from the
profile and nothing says so. On 3.12+ (`sys.monitoring`) the same program is recorded whole."""

from __future__ import annotations

import os
import pstats
import subprocess
import sys
from pathlib import Path

PROGRAM = """\
import cProfile

def work():
    return sum(i * i for i in range(1000))

def after():
    return 1

profile = cProfile.Profile()
profile.enable()
work()
profile.disable()
for _ in range(7):
    after()
"""


def _calls(stats: pstats.Stats, name: str) -> int:
    """Primitive calls of the functions whose pstats name ends with `name`."""
    rows = stats.stats  # type: ignore[attr-defined]
    return sum(row[0] for (_, _, func), row in rows.items() if func.endswith(name))


def test_calls_after_the_programs_own_cprofile_are_recorded(tmp_path: Path) -> None:
    script = tmp_path / "prog.py"
    script.write_text(PROGRAM)
    out = tmp_path / "prog.pstats"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROFKIT_")}
    done = subprocess.run(
        [sys.executable, "-m", "profkit", "run", "--no-tree", "-o", str(out), str(script)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert _calls(pstats.Stats(str(out)), "after") == 7
    if sys.version_info < (3, 12):  # (3.12+ records through sys.monitoring: nothing lost)
        assert "took profkit's profile function over (cProfile.Profile.enable at" in done.stderr


def test_the_programs_own_profilers_see_what_they_see_bare(tmp_path: Path) -> None:
    """The program's cProfile counts the same calls under profkit as bare, and after its
    sys.setprofile(None) profkit records again (3.11: its hook is put back)."""
    program = PROGRAM.replace(
        "for _ in range(7):",
        "import sys\nsys.setprofile(lambda *a: None)\n"
        "after()\nsys.setprofile(None)\nfor _ in range(7):",
    ) + ("profile.create_stats()\nprint(sorted(n for (_, _, n), r in profile.stats.items()))\n")
    script = tmp_path / "prog.py"
    script.write_text(program)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROFKIT_")}
    bare = subprocess.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120
    )
    out = tmp_path / "prog.pstats"
    done = subprocess.run(
        [sys.executable, "-m", "profkit", "run", "--no-tree", "-o", str(out), str(script)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == bare.returncode == 0, done.stderr
    assert done.stdout == bare.stdout
    # 3.11: the call made while the program's own profile function is installed is not
    # recorded (there is one profile function); 3.12+ (sys.monitoring) records all 8
    assert _calls(pstats.Stats(str(out)), "after") == (7 if sys.version_info < (3, 12) else 8)


def test_calls_after_a_with_block_are_not_put_under_its_enter(tmp_path: Path) -> None:
    """`with cProfile.Profile():` enables in `__enter__`, which returns while the program's
    profiler holds the thread: later calls belong to `<module>`, not to `__enter__`."""
    from profkit.calltree import file as profile_file

    script = tmp_path / "prog.py"
    script.write_text(
        "import cProfile\n"
        "def work():\n    return sum(range(100))\n"
        "def after():\n    return 1\n"
        "with cProfile.Profile():\n    work()\n"
        "for _ in range(3):\n    after()\n"
    )
    out = tmp_path / "p.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROFKIT_")}
    done = subprocess.run(
        [sys.executable, "-m", "profkit", "run", "--no-tree", "-o", str(out), str(script)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    profile = profile_file.load(out)
    name = {i: f.name for i, f in enumerate(profile.frames)}
    (thread,) = [t for t in profile.threads if t.name == "MainThread"]
    (main,) = [c for c in thread.root.children.values() if name[c.frame] == "__main__.<module>"]
    below = {name[c.frame]: c.calls for c in main.children.values()}
    assert below.get("__main__.after") == 3, below
