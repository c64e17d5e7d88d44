"""Memory mode says what it cannot count (finding N21).

numpy allocates its arrays' data with malloc, outside the Python allocators memory mode
samples: a numpy program's profile showed 29.6 MiB where tracemalloc saw 327 MB, and
nothing said why. The oracle is numpy itself: 80 MB of arrays kept alive, which memory
mode's total does not reach, so the run must name what it left out, on stderr at the end
and in the flat report; a program without numpy gets no such line.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

RUN = [sys.executable, "-m", "profkit", "run", "--mode", "memory"]


def _run(cmd: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROFKIT_")}
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=180)


def test_numpy_array_data_is_named_as_not_counted(tmp_path: Path) -> None:
    pytest.importorskip("numpy")
    (tmp_path / "arrays.py").write_text(
        "import numpy\nkept = [numpy.ones(1_000_000) for _ in range(10)]\nprint(len(kept))\n"
    )
    out = _run([*RUN, "-o", "m.json", "arrays.py"], tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "10\n"
    assert "profkit: not counted: numpy array data" in out.stderr
    report = _run([sys.executable, "-m", "profkit", "report", "--view", "flat", "m.json"], tmp_path)
    assert "not counted: numpy array data" in report.stdout


def test_a_program_without_such_modules_gets_no_note(tmp_path: Path) -> None:
    (tmp_path / "plain.py").write_text("kept = [bytearray(100_000) for _ in range(100)]\n")
    out = _run([*RUN, "-o", "p.json", "plain.py"], tmp_path)
    assert out.returncode == 0, out.stderr
    assert "not counted" not in out.stderr
