"""One thread, one id in every mode and every view (issue #25 item 7).

A worker thread writes its OS thread id (``threading.get_native_id()``) and Python's ident
to a file; the program is profiled in trace, sample and memory mode and through ``attach``.
In each, ``report`` names the worker ``wk (tid N)``, and the exports show the same N:
Chrome's ``tid``, speedscope's profile name, pprof's ``tid`` label, the HTML page's label.
Nothing here depends on timing: the worker runs until the profiler has seen it (the
attach case waits for a file the program writes once the worker runs).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from profkit.calltree.file import load
from profkit.export import chrome, html, speedscope

PROGRAM = r"""
import json, os, sys, threading, time
out, seconds = sys.argv[1], float(sys.argv[2])
def busy(n):
    return [str(i) for i in range(n)]
def work():
    me = threading.current_thread()
    with open(out + ".tmp", "w") as f:
        json.dump({"native": threading.get_native_id(), "ident": me.ident}, f)
    os.replace(out + ".tmp", out)  # whole or absent: the attach test polls for it
    end = time.monotonic() + seconds
    while True:
        busy(2000)
        if time.monotonic() > end:
            break
t = threading.Thread(target=work, name="wk")
t.start()
t.join()
"""


def _profkit(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "profkit", *args],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )


def _check_views(profile_path: Path, native: int) -> None:
    profile = load(profile_path)
    # Found by its OS id: sampled from outside, the thread's ``threading`` name is read from
    # the target when the sampler can (a loaded machine may not let it before the worker
    # ends; it is then named as the kernel names it, sampler.recorder.thread_label); the
    # id is what this test is about.
    worker = [t for t in profile.threads if t.native_id == native]
    assert worker, [(t.name, t.native_id) for t in profile.threads]
    name = worker[0].name
    assert name in ("wk", "python", f"Thread-{native}"), name
    label = f"{name} (tid {native})"
    assert worker[0].label == label
    report = _profkit("report", str(profile_path), "--hot-spots", "0")
    assert f"Thread {label}:" in report.stdout, report.stdout + report.stderr
    doc = json.loads(chrome.write(profile))
    tids = {e["tid"] for e in doc["traceEvents"] if e.get("args", {}).get("name") == name}
    assert tids == {native}
    names = [p["name"] for p in json.loads(speedscope.write(profile))["profiles"]]
    assert label in names
    assert f'"label":"{label}"' in html.write(profile).decode()


@pytest.mark.parametrize("mode", ["trace", "sample", "memory"])
def test_run_modes_name_the_worker_by_its_os_id(tmp_path: Path, mode: str) -> None:
    script = tmp_path / "prog.py"
    script.write_text(PROGRAM)
    ids, out = tmp_path / "ids.json", tmp_path / f"{mode}.json"
    seconds = "0.3" if mode == "trace" else "1.0"
    done = _profkit("run", "--mode", mode, "-o", str(out), str(script), str(ids), seconds)
    assert done.returncode == 0, done.stderr
    _check_views(out, json.loads(ids.read_text())["native"])


def test_attach_names_the_worker_by_its_os_id(tmp_path: Path) -> None:
    script = tmp_path / "prog.py"
    script.write_text(PROGRAM)
    ids, out = tmp_path / "ids.json", tmp_path / "attach.json"
    proc = subprocess.Popen([sys.executable, str(script), str(ids), "60"])
    try:
        deadline = time.monotonic() + 60
        while not ids.exists():
            assert time.monotonic() < deadline, "the worker never started"
            time.sleep(0.05)
        native = json.loads(ids.read_text())["native"]
        done = _profkit("attach", str(proc.pid), "-d", "1", "--no-tree", "-o", str(out))
        assert done.returncode == 0, done.stderr
    finally:
        proc.kill()
        proc.wait()
    _check_views(out, native)
    assert os.path.exists(out)
