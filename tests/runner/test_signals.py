"""Signals under ``profkit run`` (issue #17 item 1): nothing hangs, deaths are python's.

The runner's SIGTERM handler (which lets it save the profile) used to be inherited by
forked children: a ``with multiprocessing.Pool(...)`` block hung forever when
``Pool.terminate()``'s SIGTERM reached a worker still inside profkit's after-fork hook, and
a forked child sent SIGTERM survived it. Each program here is run bare and under both
modes; every process is started in its own session and killed if it outlives the test.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")

POOL = """\
import multiprocessing as mp
def square(x):
    return x * x
if __name__ == "__main__":
    ctx = mp.get_context("fork")
    total = 0
    for _ in range(4):
        with ctx.Pool(3) as pool:
            total += sum(pool.map(square, range(50)))
    print(total)
"""

TERMINATE = """\
import json, multiprocessing as mp, time
def nap(x):
    time.sleep(30)
if __name__ == "__main__":
    pool = mp.get_context("fork").Pool(2)
    workers = list(pool._pool)
    pool.map_async(nap, range(2))
    time.sleep(0.5)
    pool.terminate()
    print(json.dumps(sorted(w.exitcode for w in workers)))
"""

FORKED_CHILD = """\
import json, os, signal, time
pid = os.fork()
if pid == 0:
    time.sleep(30)
    os._exit(0)
time.sleep(0.3)
os.kill(pid, signal.SIGTERM)
_, status = os.waitpid(pid, 0)
print(json.dumps([os.WIFSIGNALED(status), os.WTERMSIG(status) if os.WIFSIGNALED(status) else None]))
"""

RUN = [sys.executable, "-m", "profkit", "run", "--no-tree"]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROFKIT_")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


#: ``--mode`` and environment: trace, sample (from outside where allowed), and the in-process
#: sampler forced (the mode the fork-pool hang was found in).
MODES = [("trace", {}), ("sample", {}), ("sample", {"PROFKIT_SAMPLER": "in-process"})]
MODE_IDS = ["trace", "sample", "sample-in-process"]


def _run(
    cmd: list[str], cwd: Path, timeout: float = 60, extra: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``cmd`` in its own session; on a timeout kill the whole session and fail."""
    proc = subprocess.Popen(
        cmd,
        cwd=cwd,
        env=_env() | (extra or {}),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"{cmd} hung (killed after {timeout} s)")
    finally:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)  # leftovers of the session, if any
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


@pytest.mark.parametrize(("mode", "extra"), MODES, ids=MODE_IDS)
def test_a_fork_pool_in_a_with_block_finishes(
    mode: str, extra: dict[str, str], tmp_path: Path
) -> None:
    (tmp_path / "pool.py").write_text(POOL)
    bare = _run([sys.executable, "pool.py"], tmp_path)
    for _ in range(3):  # the hang struck in 2-4 runs out of 4
        out = _run([*RUN, "--mode", mode, "-o", "p.json", "pool.py"], tmp_path, extra=extra)
        assert out.returncode == 0, out.stderr
        assert out.stdout == bare.stdout
        assert "Exception ignored" not in out.stderr and "Terminated" not in out.stderr


@pytest.mark.parametrize(("mode", "extra"), MODES, ids=MODE_IDS)
def test_pool_terminate_kills_the_workers_as_bare_python(
    mode: str, extra: dict[str, str], tmp_path: Path
) -> None:
    (tmp_path / "term.py").write_text(TERMINATE)
    bare = _run([sys.executable, "term.py"], tmp_path)
    out = _run([*RUN, "--mode", mode, "-o", "t.json", "term.py"], tmp_path, extra=extra)
    assert out.returncode == 0, out.stderr
    assert json.loads(bare.stdout) == [-signal.SIGTERM] * 2
    assert json.loads(out.stdout) == json.loads(bare.stdout)


@pytest.mark.parametrize(("mode", "extra"), MODES, ids=MODE_IDS)
def test_a_forked_child_dies_of_sigterm(mode: str, extra: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "kid.py").write_text(FORKED_CHILD)
    bare = _run([sys.executable, "kid.py"], tmp_path)
    out = _run([*RUN, "--mode", mode, "-o", "k.json", "kid.py"], tmp_path, extra=extra)
    assert json.loads(bare.stdout) == [True, signal.SIGTERM]
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == json.loads(bare.stdout)


def test_a_program_that_handles_sigterm_itself_keeps_its_handler_in_children(
    tmp_path: Path,
) -> None:
    code = (
        "import os, signal\n"
        "signal.signal(signal.SIGTERM, lambda *a: None)\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    print(signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL, flush=True)\n"
        "    os._exit(0)\n"
        "os.waitpid(pid, 0)\n"
    )
    (tmp_path / "own.py").write_text(code)
    bare = _run([sys.executable, "own.py"], tmp_path)
    out = _run([*RUN, "-o", "o.json", "own.py"], tmp_path)
    assert out.stdout == bare.stdout == "True\n", out.stderr


@pytest.mark.parametrize(("signum", "ready"), [(signal.SIGTERM, "ready"), (signal.SIGINT, "ready")])
def test_profkit_run_dies_of_the_programs_signal(signum: int, ready: str, tmp_path: Path) -> None:
    (tmp_path / "slow.py").write_text(
        "import atexit, time\n"
        "atexit.register(lambda: print('atexit', flush=True))\n"
        "print('ready', flush=True)\n"
        "time.sleep(300)\n"  # far longer than the wait below: a lost signal fails, load only slows
    )
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        procs = [
            subprocess.Popen(
                cmd,
                cwd=tmp_path,
                env=_env(),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for cmd in ([sys.executable, "slow.py"], [*RUN, "-o", "s.json", "slow.py"])
        ]
    finally:
        signal.signal(signal.SIGINT, previous)
    results = []
    for proc in procs:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == ready
        proc.send_signal(signum)
        try:
            out, _ = proc.communicate(timeout=90)
        finally:
            proc.kill()
        results.append((proc.returncode, out))
    assert results[0][0] == -signum
    assert results[1] == results[0]  # the same death, and atexit handlers as python runs them
    assert (tmp_path / "s.json").exists()


@pytest.mark.parametrize("mode", ["trace", "sample"])
def test_a_program_killed_by_a_signal_kills_profkit_run_the_same_way(
    mode: str, tmp_path: Path
) -> None:
    """Out-of-process engines (``--mode sample`` reading the child from outside) see the
    program die of SIGKILL: ``profkit run`` dies of it too, as its exit status would read."""
    (tmp_path / "k.py").write_text("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n")
    bare = _run([sys.executable, "k.py"], tmp_path)
    out = _run([*RUN, "--mode", mode, "-o", "k.json", "k.py"], tmp_path)
    assert bare.returncode == -signal.SIGKILL
    assert out.returncode == bare.returncode, out.stderr
