"""`profkit attach`, `top` and `dump` as a user runs them; errors are one line, status 2."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from profkit.calltree.file import load
from tests.sampler.conftest import GENERATOR, SLEEPER, all_targets, interpreter


def profkit(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "profkit", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.parametrize("version", all_targets())
def test_attach_saves_a_profile_report_reads(version, target, tmp_path):
    t = target(GENERATOR, interpreter(version))
    out = tmp_path / "att.json"
    # --idle: wall time, every sample counts (this test is about saving and reading; the
    # default, idle threads hidden, has its own test below)
    r = profkit("attach", str(t.pid), "-d", "0.5", "-o", str(out), "--rate", "2k", "--idle")
    assert r.returncode == 0, r.stderr
    assert "profile saved to" in r.stderr and "__main__.gen" in r.stderr
    profile = load(out)
    assert profile.mode == "sample"
    assert {f.name for f in profile.frames} >= {"__main__.gen", "__main__.main"}
    report = profkit("report", str(out), "--view", "flat")
    assert report.returncode == 0 and "__main__.gen" in report.stdout
    export = profkit("export", str(out), "-F", "collapsed", "-o", str(tmp_path / "c.txt"))
    assert export.returncode == 0, export.stderr


@pytest.mark.parametrize("version", all_targets())
def test_dump_prints_every_thread(version, target):
    t = target(SLEEPER, interpreter(version))
    r = profkit("dump", str(t.pid))
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("Thread ") == 2
    assert "__main__.napping" in r.stdout and "__main__.main" in r.stdout


@pytest.mark.parametrize("version", all_targets())
def test_top_refreshes_and_quits(version, target):
    t = target(GENERATOR, interpreter(version))
    r = profkit("top", str(t.pid), "--duration", "1.2", "--refresh", "0.4")
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("profkit top: pid") >= 2
    assert "__main__.gen" in r.stdout and "%Own" in r.stdout


def test_attach_a_sleeping_process(target, tmp_path):
    t = target(SLEEPER)
    out = tmp_path / "s.json"
    r = profkit("attach", str(t.pid), "-d", "0.3", "-o", str(out), "--mode", "active")
    assert r.returncode == 0, r.stderr
    profile = load(out)
    assert sum(th.root.inclusive_ns for th in profile.threads) == 0  # nobody ran


def test_attach_hides_idle_threads_by_default_and_says_so(target, tmp_path):
    """As py-spy does (issue #25 item 11): a thread asleep for the whole run showed 100 %
    of it in wall mode. Default is --mode active; --idle is wall, every thread."""
    t = target(SLEEPER)
    r = profkit("attach", str(t.pid), "-d", "0.3", "-o", str(tmp_path / "a.json"))
    assert r.returncode == 0, r.stderr
    assert "mode active; idle threads hidden (--idle shows them)" in r.stderr
    assert sum(th.root.inclusive_ns for th in load(tmp_path / "a.json").threads) == 0
    r = profkit("attach", str(t.pid), "-d", "0.3", "-o", str(tmp_path / "i.json"), "--idle")
    assert r.returncode == 0, r.stderr
    assert "mode wall;" in r.stderr and "idle threads hidden" not in r.stderr
    profile = load(tmp_path / "i.json")
    assert "__main__.napping" in {f.name for f in profile.frames}
    r = profkit("attach", str(t.pid), "-d", "0.3", "--idle", "--mode", "cpu")
    assert r.returncode == 2 and "--idle" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize(
    ("pid", "needle"),
    [
        ("0", "positive"),
        ("-5", "positive"),
        ("abc", "process id"),
        ("999999999", "no such process"),
    ],
)
def test_bad_pids_are_one_line_and_status_2(pid, needle):
    for command in ("attach", "dump", "top"):
        r = profkit(command, "--", pid) if pid.startswith("-") else profkit(command, pid)
        assert r.returncode == 2, (command, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and needle in lines[0], (command, r.stderr)
        assert "Traceback" not in r.stderr


def test_non_python_process_is_refused_naming_it():
    proc = subprocess.Popen(["sleep", "30"])
    try:
        r = profkit("dump", str(proc.pid))
        assert r.returncode == 2
        assert "not a Python process" in r.stderr and "sleep" in r.stderr
    finally:
        proc.kill()
        proc.wait()


def test_old_python_is_refused_naming_the_version():
    old = os.path.expanduser("~/.pyenv/versions/3.10.13/bin/python3.10")
    if not os.path.exists(old):
        pytest.skip("CPython 3.10 is not installed")
    proc = subprocess.Popen(
        [old, "-c", "import time; print(1, flush=True); time.sleep(30)"], stdout=subprocess.PIPE
    )
    try:
        assert proc.stdout is not None
        proc.stdout.readline()
        r = profkit("dump", str(proc.pid))
        assert r.returncode == 2
        assert "3.10" in r.stderr and "supports CPython 3.11" in r.stderr
    finally:
        proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def test_attach_writes_the_format_its_output_names(target, tmp_path):
    t = target(GENERATOR)
    out = tmp_path / "a.speedscope.json"
    r = profkit("attach", str(t.pid), "-d", "0.3", "-o", str(out), "--no-tree")
    assert r.returncode == 0, r.stderr
    assert '"$schema": "https://www.speedscope.app' in out.read_text().replace('":"', '": "')


def test_attach_to_an_unwritable_place_is_one_line(target, tmp_path):
    t = target(GENERATOR)
    r = profkit("attach", str(t.pid), "-d", "0.2", "-o", "/proc/no/such/dir/x.json", "--no-tree")
    assert r.returncode == 2
    assert r.stderr.strip().splitlines()[-1].startswith("profkit: error:")
    assert "Traceback" not in r.stderr
