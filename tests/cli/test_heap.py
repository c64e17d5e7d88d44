"""`profkit heap run`: the program runs as under python (stdout, exit status), and the report
names the leak held by a module global with its chain."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

LEAKY = """\
import sys
class Leak:
    def __init__(self):
        self.buf = bytearray(100_000)
HELD = [Leak() for _ in range(40)]
print("program output")
sys.exit(3)
"""


def profkit(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "profkit", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
    )


def test_the_report_explains_the_leak_and_the_program_is_unchanged(tmp_path: Path) -> None:
    script = tmp_path / "leaky.py"
    script.write_text(LEAKY)
    done = profkit("heap", "run", "--top", "3", str(script), "x", cwd=tmp_path)
    assert done.returncode == 3, done.stderr
    assert done.stdout == "program output\n"
    lines = done.stderr.splitlines()
    assert lines[0].startswith("profkit heap: ")
    assert "bytearray" in lines[1] and "40" in lines[1]
    assert lines[2].strip().startswith("[module] __main__.HELD -> list[")
    assert lines[2].strip().endswith("] -> __main__.Leak.buf -> bytearray")


def test_profkit_s_own_objects_are_left_out(tmp_path: Path) -> None:
    """The top type is explained by the program's own holder, and nothing of profkit is in
    the census (#25: str was explained by ``module profkit.runner -> dict -> str``)."""
    script = tmp_path / "strings.py"
    script.write_text('KEEP = [f"string number {i:08d}" for i in range(50_000)]\n')
    done = profkit("heap", "run", "--top", "8", str(script), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert "profkit's own" in lines[0] and "objects left out" in lines[0]
    assert lines[1].split()[-1] == "str"
    assert lines[2].strip().startswith("[module] __main__.KEEP -> list[")
    assert not [line for line in lines[1:] if "profkit" in line], done.stderr


def test_report_to_a_file(tmp_path: Path) -> None:
    script = tmp_path / "leaky.py"
    script.write_text(LEAKY.replace("sys.exit(3)", "raise ValueError('the program fails')"))
    out = tmp_path / "report.txt"
    done = profkit("heap", "run", "-o", str(out), str(script), cwd=tmp_path)
    assert done.returncode == 1
    assert "ValueError: the program fails" in done.stderr
    assert "-> __main__.Leak.buf -> bytearray" in out.read_text()


def test_a_missing_script_is_one_line_and_status_2(tmp_path: Path) -> None:
    done = profkit("heap", "run", str(tmp_path / "nope.py"), cwd=tmp_path)
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "nope.py" in done.stderr
    done = profkit("heap", "run", "--top", "0", "x.py", cwd=tmp_path)
    assert done.returncode == 2 and "--top" in done.stderr


def test_the_script_is_never_the_output(tmp_path: Path) -> None:
    script = tmp_path / "leaky.py"
    script.write_text(LEAKY)
    done = profkit("heap", "run", "-o", str(script), str(script), cwd=tmp_path)
    assert done.returncode == 2 and "is also an input" in done.stderr
    assert script.read_text() == LEAKY


def test_ctrl_c_writes_the_report_and_dies_of_sigint(tmp_path: Path) -> None:
    """Issue 22, item 11: with ``-o`` the report used to be refused (an interrupt had been
    seen) and the command exited 130; it is written, then the command dies of SIGINT after
    the program's exit handlers, as python does."""
    script = tmp_path / "ctrl_c.py"
    script.write_text(
        "import atexit, os, signal\n"
        "atexit.register(lambda: print('exit handler', flush=True))\n"
        "held = [bytearray(100_000) for _ in range(8)]\n"
        "os.kill(os.getpid(), signal.SIGINT)\n"
        "signal.pause()\n"
    )
    bare = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path, timeout=120
    )
    out = tmp_path / "report.txt"
    done = profkit("heap", "run", "-o", str(out), str(script), cwd=tmp_path)
    assert bare.returncode == -signal.SIGINT
    assert (done.returncode, done.stdout) == (bare.returncode, bare.stdout), done.stderr
    assert "bytearray" in out.read_text()
    assert "cli/main.py" not in done.stderr  # the program's traceback, none of profkit's frames


def test_the_chain_names_the_module_variable(tmp_path: Path) -> None:
    """Issue 24, item 3: 48 bytearrays held by ``cache = {...}`` read ``__main__.cache``."""
    script = tmp_path / "cached.py"
    script.write_text("cache = {f'k{i}': bytearray(100_000) for i in range(48)}\n")
    done = profkit("heap", "run", "--top", "1", str(script), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert "bytearray" in lines[1]
    assert lines[2].strip().startswith("[module] __main__.cache -> dict['k")
    assert lines[2].strip().endswith("'] -> bytearray")
