"""Issue #22 item 15 (Python): profkit's messages say what happened, in python's words.

* ``run DIR`` (or a zip app) without ``__main__``: python prints one line and exits 1;
  profkit printed runpy's 13-line traceback, then a tree and a profile of nothing.
* A program that lowers ``RLIMIT_NOFILE`` leaves profkit no file to open at its end: the
  error named profkit's own ``report/__init__.py`` (an import that failed) and exit 2;
  now it names the profile, the limit and the program's status, which is kept.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("kind", ["directory", "zip"])
def test_an_app_without_main_is_one_line_and_status_1_as_under_python(
    kind: str, tmp_path: Path
) -> None:
    app = tmp_path / "app"
    app.mkdir()
    (app / "helper.py").write_text("print('not main')\n")
    target = app
    if kind == "zip":
        target = tmp_path / "app.zip"
        with zipfile.ZipFile(target, "w") as zf:
            zf.write(app / "helper.py", "helper.py")
    bare = _run([sys.executable, target.name], tmp_path)
    under = _run([sys.executable, "-m", "profkit", "run", target.name], tmp_path)
    words = f"can't find '__main__' module in {str(target)!r}"
    assert bare.returncode == under.returncode == 1
    assert bare.stderr.endswith(f": {words}\n")
    assert under.stderr == f"profkit: error: {words}\n"
    assert under.stdout == bare.stdout == ""
    assert not list(tmp_path.glob("profkit-*.json"))  # nothing ran: nothing saved


_LOWERS_THE_LIMIT = """
import resource, sys
resource.setrlimit(resource.RLIMIT_NOFILE, (3, 3))
print("done")
sys.exit(3)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_NOFILE as on Linux")
def test_a_lowered_open_file_limit_names_the_profile_and_the_status(tmp_path: Path) -> None:
    (tmp_path / "p.py").write_text(_LOWERS_THE_LIMIT)
    out = tmp_path / "p.json"
    done = _run([sys.executable, "-m", "profkit", "run", "-o", str(out), "p.py"], tmp_path)
    assert done.stdout == "done\n"
    assert done.returncode == 3, done.stderr  # the program's status, not profkit's 2
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"profkit: error: cannot write profile {out}: Too many open files")
    assert "open-file limit (RLIMIT_NOFILE) is 3" in line
    assert line.endswith("(the program exited with status 3)")
    assert os.sep + "profkit" + os.sep not in line  # not profkit's own source file


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_NOFILE as on Linux")
def test_environment_activation_under_a_lowered_limit_names_the_profile(tmp_path: Path) -> None:
    """Before: 'profiler ... failed in shutdown: OSError: ... profkit/export/__init__.py'."""
    (tmp_path / "p.py").write_text(_LOWERS_THE_LIMIT)
    out = tmp_path / "p.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROFKIT_")}
    env |= {
        "PROFKIT_ENABLE_PROFILING": "1",
        "PROFKIT_PROFILER": "profkit.profilers.elt:EltProfiler",
        "PROFKIT_OUTPUT": str(out),
    }
    done = subprocess.run(
        [sys.executable, "p.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.stdout == "done\n"
    assert done.returncode == 3, done.stderr
    assert done.stderr == (
        f"profkit: cannot write profile {out}: Too many open files: "
        "the program's open-file limit (RLIMIT_NOFILE) is 3\n"
    )
