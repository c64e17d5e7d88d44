"""``profkit run --mode sample``: the program runs as a child, sampled from outside."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from profkit.calltree.file import load

GEN = """
import sys, threading
def gen(n):
    for i in range(n):
        yield i
def main():
    t = 0
    for v in gen(3_000_000):
        t += v
    print("sum", t)
worker = threading.Thread(target=main, name="worker")
worker.start(); worker.join()
main()
sys.exit(4)
"""


def _run(args: list[str], cwd: Path, env: dict[str, str] | None = None, **kw):
    return subprocess.run(
        [sys.executable, "-m", "profkit", "run", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
        **kw,
    )


def test_run_sample_reads_the_child_from_outside(tmp_path):
    (tmp_path / "app.py").write_text(GEN)
    r = _run(["--mode", "sample", "-o", "s.json", "app.py"], tmp_path)
    assert r.returncode == 4, r.stderr  # the program's own status
    assert r.stdout.count("sum ") == 2  # its stdout untouched
    profile = load(tmp_path / "s.json")
    assert profile.metadata["engine"] == "out-of-process"
    assert profile.metadata["argv"] == ["app.py"]
    names = {f.name for f in profile.frames}
    assert {"__main__.gen", "__main__.main", "__main__.<module>"} <= names
    assert not any(n.startswith(("site.", "getpath.", "encodings.")) for n in names)
    threads = {t.name for t in profile.threads}
    assert "MainThread" in threads and len(profile.threads) == 2


def test_run_sample_with_prefix_hides_other_modules(tmp_path):
    (tmp_path / "app.py").write_text(
        "import json\ndef work():\n    for _ in range(3000):\n"
        "        json.dumps(list(range(200)))\nwork()\n"
    )
    r = _run(["--mode", "sample", "--prefix", "__main__", "-o", "p.json", "app.py"], tmp_path)
    assert r.returncode == 0, r.stderr
    profile = load(tmp_path / "p.json")
    assert all(f.name.startswith("__main__.") for f in profile.frames)


def test_in_process_fallback_says_why(tmp_path):
    (tmp_path / "app.py").write_text(GEN)
    r = _run(
        ["--mode", "sample", "-o", "f.json", "app.py"],
        tmp_path,
        env={"PROFKIT_SAMPLER": "in-process"},
    )
    assert r.returncode == 4
    assert "profkit: note: PROFKIT_SAMPLER=in-process; using InProcessEngine" in r.stderr
    assert load(tmp_path / "f.json").metadata.get("engine") != "out-of-process"


def test_a_misspelt_sampler_choice_is_an_error_before_anything_runs(tmp_path):
    (tmp_path / "app.py").write_text("open('ran', 'w').close()\n")
    r = _run(
        ["--mode", "sample", "-o", "f.json", "app.py"], tmp_path, {"PROFKIT_SAMPLER": "inproces"}
    )
    assert r.returncode == 2
    assert r.stderr == (
        "profkit: error: PROFKIT_SAMPLER='inproces': expected one of auto, in-process, "
        "inprocess, off\n"
    )
    assert not (tmp_path / "ran").exists() and not (tmp_path / "f.json").exists()


SPLIT = """
import threading, time
def spin(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass
sleeper = threading.Thread(target=time.sleep, args=(0.6,), name="sleeper")
sleeper.start()
spin(0.6)
sleeper.join()
"""


def test_run_sample_takes_every_mode_attach_has(tmp_path):
    """gil and active (only running threads) as attach/top measure them: the sleeping
    thread gets (almost) nothing, the spinning main thread the run."""
    from profkit.settings import SAMPLE_CLOCKS

    (tmp_path / "app.py").write_text(SPLIT)
    for clock in ("gil", "active"):
        assert clock in SAMPLE_CLOCKS
        out = f"{clock}.json"
        r = _run(["--mode", "sample", "--sample-clock", clock, "-o", out, "app.py"], tmp_path)
        assert r.returncode == 0, r.stderr
        profile = load(tmp_path / out)
        assert profile.metadata["engine"] == "out-of-process"
        times = {t.name: t.root.inclusive_ns for t in profile.threads}
        main = times.pop("MainThread", 0)
        # (a loaded machine runs the spinning thread for only part of its 0.6 s)
        assert main > 0.02e9 and sum(times.values()) < 0.3 * main, (clock, main, times)


def test_in_process_sampler_refuses_what_it_cannot_measure(tmp_path):
    (tmp_path / "app.py").write_text("print('ran')\n")
    r = _run(
        ["--mode", "sample", "--sample-clock", "gil", "-o", "x.json", "app.py"],
        tmp_path,
        env={"PROFKIT_SAMPLER": "in-process"},
    )
    assert r.returncode == 2 and "ran" not in r.stdout
    assert "cannot measure --sample-clock gil" in r.stderr, r.stderr


def test_sigterm_ends_run_like_the_program_and_keeps_the_profile(tmp_path):
    (tmp_path / "app.py").write_text(
        "import time\nprint('ready', flush=True)\ndef wait():\n    time.sleep(60)\nwait()\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "profkit", "run", "--mode", "sample", "-o", "t.json", "app.py"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    time.sleep(0.3)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGTERM, err
    profile = load(tmp_path / "t.json")
    assert any(f.name == "__main__.wait" for f in profile.frames)


def test_forked_child_profile_is_saved_beside(tmp_path):
    (tmp_path / "app.py").write_text(
        "import os, time\n"
        "def child():\n    end = time.time() + 0.6\n    while time.time() < end:\n        pass\n"
        "time.sleep(0.2)\n"
        "pid = os.fork()\n"
        "if pid == 0:\n    child(); os._exit(0)\n"
        "os.waitpid(pid, 0)\n"
    )
    r = _run(["--mode", "sample", "-o", "k.json", "app.py"], tmp_path)
    assert r.returncode == 0, r.stderr
    extra = sorted(p.name for p in tmp_path.glob("k.*.json"))
    assert len(extra) == 1, (extra, r.stderr)
    child = load(tmp_path / extra[0])
    assert any(f.name == "__main__.child" for f in child.frames)
    assert "child process profile" in r.stderr
