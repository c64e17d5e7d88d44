"""A forked child of ``profkit run`` goes on with ``run``'s profiler, reset in place (issue 22,
item 13), in trace and memory mode.

``profkit run`` prepares, before recording starts, what the start-up hook would build in a
child from the environment it sets for children (``activation.Handover``); a forked child
swaps that in (the child's settings and saver) and resets the profiler in place
(``startup.resume_in_child``, ``Session.reset_after_fork``) instead of dropping it and
attaching a new one. What is asserted, as in ``tests/collect/test_fork_reset.py``: the route
taken, and that each process's profile holds its own work and only that, saved where a
child's profile has always gone (``<output stem>.<pid>.json``, absolute, with the parent's
settings but for ``output`` and ``tree``). The costs are ``bench/fork_bench.py``'s.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from profkit.calltree import file as profile_file
from tests.collect.test_fork_reset import FIRST_SIGHTS, HELPERS

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")

# ``route`` tells whether the child went on with run's session (reset in place) or a new
# one was attached; ``end`` writes it and leaves the way the program asks: ``detach`` (save
# now) and ``os._exit``, or ``sys.exit`` back through profkit run (which then saves).
PRELUDE = """\
import json, os, sys
import profkit.collect as collect

def parent_work():
    return [0] * 100_000  # 800 kB: above memory mode's sampling mean, always recorded

def child_work():
    return [1] * 200_000

def route(before):
    now = collect.current_session()
    return "reset" if now is before and not collect._inherited else "new"

def end(name, before, how="_exit"):
    with open(name, "w") as f:
        f.write(json.dumps([os.getpid(), route(before)]))
    if how == "_exit":
        collect.detach()
        os._exit(0)
    sys.exit(0)

session = collect.current_session()
kept = []
"""

PLAIN = """\
for _ in range(5):
    kept.append(parent_work())
pid = os.fork()
if pid == 0:
    for _ in range(3):
        kept.append(child_work())
    end("child.json", session, HOW)
os.waitpid(pid, 0)
for _ in range(2):
    kept.append(parent_work())
"""

NESTED = """\
kept.append(parent_work())
pid = os.fork()
if pid == 0:
    child_session = collect.current_session()
    kept.append(child_work())
    grand = os.fork()
    if grand == 0:
        for _ in range(4):
            kept.append(child_work())
        end("grandchild.json", child_session)
    os.waitpid(grand, 0)
    kept.append(child_work())
    end("child.json", session)
os.waitpid(pid, 0)
"""

ENV_CHANGED = """\
os.environ["PROFKIT_UNIT"] = "ns"
pid = os.fork()
if pid == 0:
    kept.append(child_work())
    end("child.json", session)
os.waitpid(pid, 0)
"""


def _calls(path: Path) -> dict[str, int]:
    """Per function of the program in one saved profile: its calls, or in memory mode the
    lists it made (its bytes in lists of ``child_work``'s size, each always recorded)."""
    profile = profile_file.load(path)
    counts: dict[str, int] = {}
    for thread in profile.threads:
        for _, node in thread.root.walk():
            if node.frame is not None:
                name = profile.frames[node.frame].name
                if name.startswith("__main__.") and name not in HELPERS:
                    short = name.removeprefix("__main__.")
                    if profile.mode == "memory":
                        size = (100_000 if short == "parent_work" else 200_000) * 8
                        counts[short] = counts.get(short, 0) + node.exclusive_ns // size
                    else:
                        counts[short] = counts.get(short, 0) + node.calls
    return counts


def _run(tmp_path: Path, body: str, *flags: str, how: str = "_exit") -> dict[str, list[object]]:
    """``profkit run`` the program (it must exit 0, its output unchanged); each forked
    process's ``[pid, route]`` by role."""
    (tmp_path / "prog.py").write_text(PRELUDE + f"HOW = {how!r}\n" + body)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROFKIT_")}
    cmd = [sys.executable, "-m", "profkit", "run", "--no-tree", *flags, "-o", "out.json"]
    done = subprocess.run(
        [*cmd, "prog.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    return {p.stem: json.loads(p.read_text()) for p in tmp_path.glob("*child.json")}


def _child(tmp_path: Path, pid: object) -> Path:
    return tmp_path / f"out.{pid}.json"


@pytest.mark.parametrize("how", ["_exit", "exit"])
def test_a_run_child_goes_on_with_runs_profiler(tmp_path: Path, how: str) -> None:
    ends = _run(tmp_path, PLAIN, how=how)
    pid, route = ends["child"]
    assert route == "reset"
    child = profile_file.load(_child(tmp_path, pid))
    assert _calls(_child(tmp_path, pid)) == {"child_work": 3}
    assert _calls(tmp_path / "out.json") == {"parent_work": 7}
    # The child's own settings (its file, no tree), as the start-up hook builds them, and
    # nothing of run's own: no calibration (run measures one; a child never did).
    meta, parent = child.metadata, profile_file.load(tmp_path / "out.json").metadata
    assert meta["pid"] == pid
    assert meta["settings"]["output"] == str(tmp_path / "out.{pid}.json")
    assert meta["settings"]["tree"] == "0"
    same = {k: v for k, v in meta["settings"].items() if k not in ("output", "tree")}
    assert same == {k: v for k, v in parent["settings"].items() if k not in ("output", "tree")}
    assert meta["compensation"]["applied"] is False
    assert "not calibrated" in meta["compensation"]["why"]


def test_a_memory_mode_child_goes_on_with_runs_profiler(tmp_path: Path) -> None:
    ends = _run(tmp_path, PLAIN, "--mode", "memory")
    pid, route = ends["child"]
    assert route == "reset"
    child = profile_file.load(_child(tmp_path, pid))
    assert child.mode == "memory"
    assert child.metadata["settings"]["mode"] == "memory"
    # Only the child's allocations: the parent's log and live objects were put aside.
    assert _calls(_child(tmp_path, pid)) == {"child_work": 3}
    assert _calls(tmp_path / "out.json") == {"parent_work": 7}


@pytest.mark.parametrize("mode", ["trace", "memory"])
def test_a_child_of_a_child(tmp_path: Path, mode: str) -> None:
    ends = _run(tmp_path, NESTED, "--mode", mode)
    (child_pid, child_route), (grand_pid, grand_route) = ends["child"], ends["grandchild"]
    assert (child_route, grand_route) == ("reset", "reset")
    assert _calls(_child(tmp_path, grand_pid)) == {"child_work": 4}
    assert _calls(_child(tmp_path, child_pid)) == {"child_work": 2}
    assert _calls(tmp_path / "out.json") == {"parent_work": 1}


@pytest.mark.parametrize("mode", ["trace", "memory"])
def test_a_changed_environment_gets_a_new_profiler(tmp_path: Path, mode: str) -> None:
    """The program changed a setting before forking: the child builds its profiler from
    its own environment, as it always did."""
    ends = _run(tmp_path, ENV_CHANGED, "--mode", mode)
    pid, route = ends["child"]
    assert route == "new"
    child = profile_file.load(_child(tmp_path, pid))
    assert child.metadata["settings"]["unit"] == "ns"
    assert _calls(_child(tmp_path, pid)) == {"child_work": 1}


def test_a_stream_gets_a_new_profiler(tmp_path: Path) -> None:
    """Event lines have a writer thread, which a forked child has not: a new profiler,
    writing the child's own stream, as before."""
    ends = _run(tmp_path, PLAIN, "--stream", "events.txt")
    pid, route = ends["child"]
    assert route == "new"
    assert _calls(_child(tmp_path, pid)) == {"child_work": 3}
    assert (tmp_path / f"events.{pid}").exists() or list(tmp_path.glob(f"events.{pid}*"))


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="the setprofile backend's (3.11)")
def test_a_run_child_meets_no_code_of_profkits_for_the_first_time(tmp_path: Path) -> None:
    """run's own after-fork code (its SIGTERM hooks, the handover) is classified by the
    parent too (see tests/collect/test_fork_reset.py)."""
    _, seen = _run(tmp_path, FIRST_SIGHTS)["child"]
    assert set(seen) <= {"_release_inherited"}, seen
