"""``attach``, ``dump``, ``top`` and ``run --mode sample`` on the real CoreCLR 3.1 runtime.

No test asserts shares, rates or timings (a busy machine can miss them): those are
``bench/dotnet_sample_truth.py``'s. These check that the methods are *named*, that each
thread is its own tree, that a target's exit keeps what was seen, and what is said when a
PID cannot be sampled.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import profkit as profkit_package
from profkit.calltree.file import load
from tests.dotnet.conftest import Start, profkit


def _names(profile_path: Path) -> set[str]:
    return {f.name for f in load(profile_path).frames}


def test_attach_names_the_hot_method(start: Start, tmp_path: Path) -> None:
    proc = start("spin", "120")
    out = tmp_path / "a.json"
    done = profkit("attach", str(proc.pid), "-d", "2", "-o", str(out), "--no-tree")
    assert done.returncode == 0, done.stderr
    profile = load(out)
    names = {f.name for f in profile.frames}
    assert "SampleTest.Hot.Spin" in names and "SampleTest.Program.Main" in names
    assert "[unknown]" not in names
    main = [t for t in profile.threads if t.thread_id == proc.pid]
    assert main and main[0].name == "Main Thread"
    sampler = profile.metadata["sampler"]
    assert sampler["samples"] > 0 and sampler["rundown_complete"]
    assert "wall" in sampler["clock"]
    assert proc.poll() is None  # it runs on
    with open(f"/proc/{proc.pid}/maps") as fh:
        mapped = fh.read()
    # nothing of profkit's loaded into it (by file: a checkout's path may say "profkit")
    package = os.path.dirname(os.path.abspath(profkit_package.__file__))
    assert package not in mapped and "libprofkit" not in mapped


def test_dump_names_the_running_method(start: Start) -> None:
    proc = start("spin", "120")
    done = profkit("dump", str(proc.pid))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith(f"Thread {proc.pid} (Main Thread)")
    main = []
    for line in lines[1:]:
        if line.startswith("Thread "):
            break
        main.append(line.strip())
    assert "SampleTest.Hot.Spin" in main and main[-1] == "SampleTest.Program.Main"
    assert proc.poll() is None


def test_top_shows_the_hot_method(start: Start) -> None:
    proc = start("spin", "120")
    done = profkit("top", str(proc.pid), "-d", "2", "--refresh", "0.5")
    assert done.returncode == 0, done.stderr
    assert "SampleTest.Hot.Spin" in done.stdout


def test_dozens_of_threads_are_kept_apart(start: Start, tmp_path: Path) -> None:
    proc = start("threads", "40", "120")
    out = tmp_path / "t.json"
    done = profkit("attach", str(proc.pid), "-d", "2", "-o", str(out), "--no-tree")
    assert done.returncode == 0, done.stderr
    profile = load(out)
    workers = [
        t for t in profile.threads
        if any(profile.frames[c.frame].name.startswith("System.Threading") for c in t.root.children.values())
    ]  # fmt: skip
    assert len(workers) >= 30  # every worker seen at least once in 2 s; each its own tree
    assert len({t.thread_id for t in profile.threads}) == len(profile.threads)
    assert "SampleTest.Hot.Worker" in {f.name for f in profile.frames}


def test_target_exiting_mid_session_keeps_what_was_seen(start: Start, tmp_path: Path) -> None:
    proc = start("spin", "120")
    out = tmp_path / "e.json"
    attach = subprocess.Popen(
        [sys.executable, "-m", "profkit", "attach", str(proc.pid), "-d", "300", "-o", str(out)],
        stderr=subprocess.PIPE,
        text=True,
    )
    assert attach.stderr is not None
    assert "profkit: sampling pid" in attach.stderr.readline()
    time.sleep(1.5)
    proc.terminate()  # the runtime exits (its SIGTERM handling) while sampled
    _, err = attach.communicate(timeout=240)
    assert attach.returncode == 0, err
    assert f"pid {proc.pid} exited" in err
    assert "SampleTest.Hot.Spin" in _names(out)


def test_run_mode_sample(sampled: Path, dotnet: str, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    done = profkit(
        "run", "--mode", "sample", "--prefix", "SampleTest", "-o", str(out), str(sampled),
        "phases", "300",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "ready" and "phase Gamma" in done.stdout
    names = _names(out)
    for phase in ("Alpha", "Beta", "Gamma"):
        assert f"SampleTest.Phases.{phase}" in names
    assert all(n.startswith(("SampleTest.", "[")) for n in names)  # --prefix
    meta = load(out).metadata
    assert meta["sampler"]["unseen_start_ns"] > 0
    # the program's own exit status is profkit's
    failing = profkit("run", "--mode", "sample", "-o", str(out), str(sampled), "nosuchmode")
    assert failing.returncode == 3


def test_export_and_html_of_a_dotnet_profile(start: Start, tmp_path: Path) -> None:
    proc = start("spin", "120")
    html = tmp_path / "a.html"
    done = profkit("attach", str(proc.pid), "-d", "1", "-o", str(html), "--no-tree")
    assert done.returncode == 0, done.stderr
    assert "SampleTest.Hot.Spin" in html.read_text()


def test_raw_stream_saved_and_reported(start: Start, tmp_path: Path) -> None:
    proc = start("spin", "120")
    raw = tmp_path / "s.nettrace"
    done = profkit("attach", str(proc.pid), "-d", "1", "-o", str(raw), "--no-tree")
    assert done.returncode == 0, done.stderr
    assert raw.read_bytes()[:8] == b"Nettrace"
    report = profkit("report", str(raw))
    assert report.returncode == 0, report.stderr
    assert "SampleTest.Hot.Spin" in report.stdout
    flame = profkit(
        "export", "-F", "speedscope", str(raw), "-o", str(tmp_path / "s.speedscope.json")
    )
    assert flame.returncode == 0, flame.stderr
    assert "SampleTest.Hot.Spin" in (tmp_path / "s.speedscope.json").read_text()


def test_report_of_the_runtimes_own_startup_trace(
    sampled: Path, dotnet: str, tmp_path: Path
) -> None:
    # CoreCLR 3.1 writes <program>.<pid>.nettrace in its working directory; (3.1.23 crashes
    # when COMPlus_EventPipeOutputPath names the file, so the default name is used)
    env = {**os.environ, "COMPlus_EnableEventPipe": "1"}
    run = subprocess.run(
        [dotnet, str(sampled), "phases", "200"], cwd=tmp_path, env=env, capture_output=True
    )
    assert run.returncode == 0, run.stderr
    traces = list(tmp_path.glob("*.nettrace"))
    assert len(traces) == 1
    done = profkit("report", str(traces[0]))
    assert done.returncode == 0, done.stderr
    assert "SampleTest.Phases.Beta" in done.stdout


def test_diagnostics_turned_off_is_said_plainly(start: Start) -> None:
    proc = start("spin", "120", env={"COMPlus_EnableDiagnostics": "0"})
    for command in ("attach", "dump"):
        done = profkit(command, str(proc.pid), *(["-d", "1"] if command == "attach" else []))
        assert done.returncode == 2
        assert "COMPlus_EnableDiagnostics=0" in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1
        assert "Traceback" not in done.stderr


def test_not_dotnet_and_not_alive(tmp_path: Path) -> None:
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        done = profkit("attach", str(sleeper.pid), "-d", "1")
        assert done.returncode == 2
        assert "not a Python process, nor a .NET one" in done.stderr
    finally:
        sleeper.kill()
        sleeper.wait()
    for command in ("attach", "dump", "top"):
        gone = profkit(command, str(sleeper.pid))
        assert gone.returncode == 2
        assert f"pid {sleeper.pid}: no such process" in gone.stderr
        assert len(gone.stderr.strip().splitlines()) == 1


def test_profile_metadata_is_json(start: Start, tmp_path: Path) -> None:
    proc = start("block", "120")
    out = tmp_path / "b.json"
    done = profkit("attach", str(proc.pid), "-d", "1", "-o", str(out), "--no-tree")
    assert done.returncode == 0, done.stderr
    profile = load(out)
    json.dumps(profile.metadata)
    # a sleeping thread is in external code, under the method that slept
    assert "[external code]" in {f.name for f in profile.frames}
    assert "SampleTest.Hot.Nap" in {f.name for f in profile.frames}


def test_r2r_images_name_what_the_rundown_names(start: Start) -> None:
    """With no method event at all, the mapped R2R images alone name the framework's
    precompiled code as the rundown does (generic methods lose their ``N arity: the
    image's names do not carry it)."""
    from profkit.dotnet.images import MappedImages
    from profkit.dotnet.methods import MethodTable
    from profkit.dotnet.session import LiveSession

    proc = start("spin", "120")
    session = LiveSession(proc.pid, names_session=False)
    session.wait(0.5, threading.Event())
    session.stop()
    images = MappedImages(proc.pid)
    images.refresh()
    corelib = next(p for p in images.ranges if p.endswith("System.Private.CoreLib.dll"))
    lo, hi = images.ranges[corelib]
    alone = MethodTable()
    images.attach_to(alone)
    rundown = session.collector.methods
    checked = same = 0
    for start_ip, name in rundown.ranges():
        if lo <= start_ip < hi and "``" not in name:
            checked += 1
            same += alone.name(start_ip) == name
    assert checked >= 20
    assert same >= 0.9 * checked


def test_names_line_up_with_the_trace_mode(sampled: Path, dotnet: str, tmp_path: Path) -> None:
    """The same program under the CLR profiler (trace) and sampled: one spelling."""
    from profkit.clr.environment import library_path
    from profkit.errors import UsageError

    try:
        library_path()
    except UsageError as exc:
        pytest.skip(str(exc))
    trace, sample = tmp_path / "t.json", tmp_path / "s.json"
    for mode, out in (("trace", trace), ("sample", sample)):
        done = profkit("run", "--mode", mode, "-o", str(out), str(sampled), "threads", "3", "1")
        assert done.returncode == 0, done.stderr
    traced = _names(trace)
    ours = {n for n in _names(sample) if n.startswith("SampleTest.")}
    assert {"SampleTest.Hot.Worker", "SampleTest.Program.Main"} <= ours <= traced


def test_killed_target_is_named_by_the_early_rundown(start: Start) -> None:
    """SIGKILL takes the session's end rundown with it: the names come from the second,
    names-only session profkit stops right after starting (its rundown)."""
    from profkit.dotnet.session import LiveSession

    proc = start("spin", "120")
    session = LiveSession(proc.pid)
    deadline = time.monotonic() + 120
    # 200 samples, not 1: "ready" is printed before Spin is entered (and JIT-compiled), and
    # on a loaded machine the first samples were all of Main and Console.WriteLine, so a
    # kill after the first one left Spin unseen (issue #22 item 16). A count, not a time.
    while (session.collector.samples < 200 or not len(session.collector.methods)) and (
        time.monotonic() < deadline
    ):
        time.sleep(0.1)
    proc.kill()
    assert session.wait(60, threading.Event()) == "exited"
    session.stop()
    profile = session.profile()
    assert not profile.metadata["sampler"]["rundown_complete"]
    assert "SampleTest.Hot.Spin" in {f.name for f in profile.frames}
