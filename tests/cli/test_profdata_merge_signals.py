"""`profkit profdata merge -j 2` killed mid-merge leaves nothing behind (issue #17).

Before: SIGTERM or kill -9 of the parent left its workers running (65-80 MB each, found
an hour later) and a hidden temp output. Now SIGTERM unwinds (pool killed, temp removed,
then the process dies of SIGTERM), Ctrl-C does the same with status 130, and workers
ask the kernel to kill them when their parent dies (kill -9).

The merge is made slow enough to interrupt with text inputs (parsed in Python, ~0.1 s
each): 200 hard links to one 1.6 MB file, so the test costs little disk.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="reads /proc to find the workers"
)


def _children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(entry))
    return out


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("slow_merge")
    lines = [":ir"]
    for i in range(20000):
        lines += [f"function_{i}", "# Func Hash:", str(1000 + i), "# Num Counters:", "2"]
        lines += ["# Counter Values:", str(i), "2", ""]
    base = root / "base.proftext"
    base.write_text("\n".join(lines) + "\n")
    folder = root / "in"
    folder.mkdir()
    for i in range(200):
        os.link(base, folder / f"p{i:03d}.proftext")
    return root


@pytest.mark.parametrize(
    ("sig", "status"),
    [(signal.SIGTERM, -signal.SIGTERM), (signal.SIGKILL, -signal.SIGKILL), (signal.SIGINT, 130)],
)
def test_killed_merge_leaves_no_workers_and_no_temp_output(
    inputs: Path, tmp_path: Path, sig: signal.Signals, status: int
) -> None:
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "profkit", "profdata", "merge", "-j", "2"),
            *("-o", str(out_dir / "merged.profdata"), str(inputs / "in")),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    workers: list[int] = []
    try:
        deadline = time.monotonic() + 60
        while not workers and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
            workers = _children(proc.pid)
        if not workers:
            pytest.skip("the merge finished before its worker could be seen")
        time.sleep(0.3)  # let the worker get going
        if proc.poll() is not None:
            pytest.skip("the merge finished before it could be interrupted")
        proc.send_signal(sig)
        assert proc.wait(timeout=30) == status
        deadline = time.monotonic() + 10
        while any(map(_alive, workers)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not [w for w in workers if _alive(w)], "a worker outlived the merge"
        assert sorted(os.listdir(out_dir)) == [], "an output or temp file was left behind"
    finally:
        for pid in [proc.pid, *workers]:
            if _alive(pid) and _is_profkit(pid):  # (never a recycled pid)
                os.kill(pid, signal.SIGKILL)
        proc.wait(timeout=30)


def _is_profkit(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return b"profkit" in fh.read()
    except OSError:
        return False
