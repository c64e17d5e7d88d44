"""Per-thread totals of a memory profile (issue #15): which thread allocated, peaked and leaked
what. Buffers of 1 MiB are far above the 64 KiB sampling mean, so each is seen with its exact size."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from profkit.calltree import file as profile_file
from profkit.heap import native_available

pytestmark = pytest.mark.skipif(
    not native_available(), reason="the allocation hooks (_heaphook) were not built"
)

MiB = 1024 * 1024

PROGRAM = """\
import threading
keep = []

def worker():  # 6 MiB kept (leaked), at most 6 MiB of its own alive at once
    for _ in range(6):
        keep.append(bytearray(1024 * 1024))

def churn():  # 10 MiB, one alive at a time: its own peak is 1 MiB, nothing left
    for _ in range(10):
        b = bytearray(1024 * 1024)
        del b

t = threading.Thread(target=worker, name="keeper")
t.start()
t.join()
churn()
"""


def test_each_thread_has_its_allocated_peak_and_leaked_bytes(tmp_path: Path) -> None:
    script = tmp_path / "prog.py"
    script.write_text(PROGRAM)
    out = tmp_path / "mem.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROFKIT_")}
    cmd = [
        sys.executable,
        "-m",
        "profkit",
        "run",
        "--no-tree",
        "--mode",
        "memory",
        "--alloc-sample",
        "64KiB",
    ]
    done = subprocess.run(
        [*cmd, "-o", str(out), str(script)], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    rows = {row["name"]: row for row in profile_file.load(str(out)).metadata["memory_threads"]}
    keeper = rows["keeper"]
    main = next(row for name, row in rows.items() if name != "keeper" and row["allocated_bytes"])
    assert keeper["allocated_bytes"] == pytest.approx(6 * MiB, rel=0.02)
    assert keeper["peak_bytes"] == pytest.approx(6 * MiB, rel=0.02)
    assert keeper["leaked_bytes"] == pytest.approx(6 * MiB, rel=0.02)
    assert keeper["at_process_peak_bytes"] == pytest.approx(6 * MiB, rel=0.02)
    assert main["allocated_bytes"] == pytest.approx(10 * MiB, rel=0.05)
    assert main["peak_bytes"] < 2.5 * MiB
    assert main["leaked_bytes"] < 0.5 * MiB
