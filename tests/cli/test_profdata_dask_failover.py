"""A Dask worker killed mid-merge (#16, "Bad input"): Dask reruns its tasks elsewhere and
the output is still exactly the serial merge's.

A scheduler and two workers without nannies (so a killed worker stays dead) are started
on 127.0.0.1; once the first leaf has finished, one worker gets SIGKILL.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

distributed = pytest.importorskip(
    "distributed", reason="dask.distributed is not installed (pip install 'profkit[dask]')"
)


def _text_profile(path: Path, functions: int, seed: int) -> None:
    lines = [":ir"]
    for i in range(functions):
        lines += [f"fn_{i}", "# Func Hash:", str(7 + i), "# Num Counters:", "2"]
        lines += ["# Counter Values:", str((i * seed) % 97), str(seed), ""]
    path.write_text("\n".join(lines) + "\n")


def _start(cmd: list[str], cwd: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", *cmd], cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


@pytest.mark.slow
def test_worker_killed_mid_merge_output_still_exact(tmp_path: Path) -> None:
    from profkit.formats.instrprof.indexed_writer import build_indexed
    from profkit.formats.instrprof.merge.files import MergeInput, merge_files
    from profkit.formats.instrprof.merge.on_dask import merge_on_dask

    inputs = []
    for i in range(32):
        path = tmp_path / f"p{i:02d}.proftext"
        _text_profile(path, 1500, i % 5 + 1)
        inputs.append(MergeInput(str(path), 1 + i % 2))
    serial = build_indexed(merge_files(inputs, jobs=1).profile)

    info = tmp_path / "scheduler.json"
    procs = [
        _start(
            [
                *("distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", "0"),
                *("--no-dashboard", "--scheduler-file", str(info)),
            ],
            tmp_path,
        )
    ]
    try:
        deadline = time.monotonic() + 60
        while not info.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        if not info.exists():
            pytest.skip("the dask scheduler did not start within 60 s")
        time.sleep(0.2)
        address = json.loads(info.read_text())["address"]
        worker_args = ["--nthreads", "1", "--no-nanny", "--no-dashboard", "--host", "127.0.0.1"]
        workers = [
            _start(["distributed.cli.dask_worker", address, *worker_args], tmp_path)
            for _ in range(2)
        ]
        procs += workers
        client = distributed.Client(address, timeout="30s")
        try:
            client.wait_for_workers(2, timeout=60)
            done: list[int] = []
            outcome: dict[str, Any] = {}

            def merge() -> None:
                try:
                    outcome["result"] = merge_on_dask(inputs, client, batch=2, progress=done.append)
                except BaseException as exc:  # reported by the main thread
                    outcome["error"] = exc

            thread = threading.Thread(target=merge)
            thread.start()
            deadline = time.monotonic() + 120
            while not done and thread.is_alive() and time.monotonic() < deadline:
                time.sleep(0.01)
            killed = thread.is_alive()
            if killed:
                os.kill(workers[0].pid, signal.SIGKILL)
            thread.join(timeout=300)
            assert not thread.is_alive(), "the merge did not finish after a worker died"
        finally:
            client.close()
        assert "error" not in outcome, outcome.get("error")
        result = outcome["result"]
        assert not result.failures and result.merged == len(inputs)
        assert build_indexed(result.profile) == serial
        if not killed:
            pytest.skip("the merge finished before a worker could be killed (exactness checked)")
    finally:
        for proc in reversed(procs):
            if proc.poll() is None:
                proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
