"""SIGTERM saves a profiled worker's profile before it kills it (collect/terminate.py).

``with Pool(...) as pool: pool.map(...)``, the usual ``multiprocessing`` idiom, ends its
workers with ``Pool.terminate()``'s SIGTERM. They used to die at once, unsaved, so the
profile showed only the parent waiting. The oracle here is the program itself: ``sq`` is
called exactly 60 times, so the workers' profiles together must count 60 calls, in every
start method. A worker stuck in one long C call dies of SIGTERM as the bare one does
(the C deadline), and a program's own SIGTERM handler stays the program's.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from profkit.calltree import file as profile_file

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")

POOL = """\
import multiprocessing as mp, sys
def sq(x):
    return x * x
if __name__ == "__main__":
    with mp.get_context(sys.argv[1]).Pool(3) as pool:
        print(sum(pool.map(sq, range(60))))
"""

STUCK = """\
import multiprocessing as mp, sys, time
def busy():
    sum(range(10**13))  # one C call: no bytecode boundary where a Python handler could run
if __name__ == "__main__":
    p = mp.get_context(sys.argv[1]).Process(target=busy)
    p.start()
    time.sleep(0.5)
    p.terminate()
    p.join(120)
    print(p.exitcode)
"""

OWN_HANDLER = """\
import multiprocessing as mp, os, signal, sys, time
def keep(ready):
    signal.signal(signal.SIGTERM, lambda *a: os._exit(7))
    ready.set()
    time.sleep(60)
if __name__ == "__main__":
    ctx = mp.get_context(sys.argv[1])
    ready = ctx.Event()
    p = ctx.Process(target=keep, args=(ready,))
    p.start()
    assert ready.wait(60)
    p.terminate()
    p.join(60)
    print(p.exitcode)
"""

RUN = [sys.executable, "-m", "profkit", "run", "--no-tree"]


def _run(cmd: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROFKIT_")}
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=180)


def _calls(path: Path, name: str) -> int:
    profile = profile_file.load(path)
    wanted = {i for i, f in enumerate(profile.frames) if f.name == name}
    return sum(
        node.calls
        for thread in profile.threads
        for _, node in thread.root.walk()
        if node.frame in wanted
    )


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_with_pool_workers_save_their_profiles(method: str, tmp_path: Path) -> None:
    """Up to three runs, one of which must count all 60 calls: before the handler every
    run lost workers (0-55 calls); CI once saw a run of 35 on 3.11 fork (a worker's
    profile missing) that 27 runs here could not repeat. A rare loss is a known limit
    (docs/elt.md), a systematic one fails."""
    counts = []
    for attempt in range(3):
        work = tmp_path / str(attempt)
        work.mkdir()
        (work / "pool.py").write_text(POOL)
        out = _run([*RUN, "-o", "p.json", "pool.py", method], work)
        assert out.returncode == 0, out.stderr
        assert out.stdout == "70210\n"
        counts.append(sum(_calls(child, "__main__.sq") for child in work.glob("p.*.json")))
        if counts[-1] == 60:
            break
    assert counts[-1] == 60, (counts, out.stderr)


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_a_worker_stuck_in_c_dies_of_sigterm_as_bare(method: str, tmp_path: Path) -> None:
    (tmp_path / "stuck.py").write_text(STUCK)
    bare = _run([sys.executable, "stuck.py", method], tmp_path)
    out = _run([*RUN, "-o", "s.json", "stuck.py", method], tmp_path)
    assert bare.stdout == f"{-signal.SIGTERM}\n"
    assert out.returncode == 0, out.stderr
    assert out.stdout == bare.stdout


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_a_workers_own_sigterm_handler_is_its_own(method: str, tmp_path: Path) -> None:
    (tmp_path / "own.py").write_text(OWN_HANDLER)
    bare = _run([sys.executable, "own.py", method], tmp_path)
    out = _run([*RUN, "-o", "o.json", "own.py", method], tmp_path)
    assert bare.stdout == "7\n"
    assert out.returncode == 0, out.stderr
    assert out.stdout == bare.stdout


def test_an_env_profiled_process_saves_and_dies_of_sigterm(tmp_path: Path) -> None:
    """Any ``PROFKIT_ENABLE_PROFILING=1`` process, not only a worker."""
    (tmp_path / "nap.py").write_text(
        "import time\ndef f():\n    return 1\nf()\nprint('ready', flush=True)\ntime.sleep(60)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROFKIT_")}
    env |= {
        "PROFKIT_ENABLE_PROFILING": "1",
        "PROFKIT_PROFILER": "elt",
        "PROFKIT_OUTPUT": str(tmp_path / "n.json"),
        "PROFKIT_TREE": "0",
    }
    proc = subprocess.Popen(
        [sys.executable, "nap.py"], cwd=tmp_path, env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == "ready\n"
        proc.terminate()
        assert proc.wait(timeout=60) == -signal.SIGTERM
    finally:
        proc.kill()
        proc.wait()
    assert _calls(tmp_path / "n.json", "__main__.f") == 1
