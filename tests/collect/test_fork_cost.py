"""Forked children of a profiled program: profiled correctly, and cheaply (issue 22, item 13).

Each fork cost 15-90 ms (bare ~1 ms): among others the child imported (without bytecode
files, compiled) the export registry with dataclasses and inspect, only to check
``PROFKIT_FORMAT=profile``; it scanned every distribution's entry points for
``PROFKIT_PROFILER=elt`` and calibrated a profiler that never used the result. The times
are ``bench/fork_bench.py``'s; what is asserted here is behaviour: every child's profile
counts its own calls, and at the fork a child loads no module (``profkit run`` loads the
start-up hook the children attach through before the program starts, unrecorded;
loading it in the parent's before-fork hook showed in the parent's profile).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from profkit.calltree import file as profile_file

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")

FORKER = """\
import atexit, json, os, sys
def work(n):
    return sum(range(n))
def report(name, before):
    with open(name, "w") as f:
        f.write(json.dumps(sorted(set(sys.modules) - before)))
for i in range(3):
    pid = os.fork()
    if pid == 0:
        at_fork = set(sys.modules)
        atexit.register(report, f"exit.{os.getpid()}.txt", at_fork)  # after profkit's save
        for _ in range(7 + i):
            work(10)
        with open(f"fork.{os.getpid()}.txt", "w") as f:
            f.write(json.dumps(sorted(at_fork)))
        sys.exit(0)
    parent = set(sys.modules)  # the parent's, once the fork returned
    os.waitpid(pid, 0)
    child = set(json.load(open(f"fork.{pid}.txt")))
    print(json.dumps(sorted(child - parent)), flush=True)
"""

ROUTES = {
    "run": (["-m", "profkit", "run", "--no-tree", "-o", "out.json"], {}),
    "run memory": (["-m", "profkit", "run", "--mode", "memory", "--no-tree", "-o", "out.json"], {}),
    "env": (
        [],
        {
            "PROFKIT_ENABLE_PROFILING": "1",
            "PROFKIT_PROFILER": "elt",
            "PROFKIT_TREE": "0",
            "PROFKIT_OUTPUT": "out.{pid}.json",
        },
    ),
}


def _calls(path: Path, name: str) -> int:
    profile = profile_file.load(path)
    wanted = {i for i, f in enumerate(profile.frames) if f.name == name}
    return sum(
        node.calls
        for thread in profile.threads
        for _, node in thread.root.walk()
        if node.frame in wanted
    )


@pytest.mark.parametrize("route", list(ROUTES))
def test_forked_children_are_profiled_and_load_nothing_anew(route: str, tmp_path: Path) -> None:
    (tmp_path / "forker.py").write_text(FORKER)
    args, extra = ROUTES[route]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROFKIT_")} | extra
    done = subprocess.run(
        [sys.executable, *args, "forker.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["[]"] * 3, "modules imported at fork: " + done.stdout
    at_exit = {p.name: json.loads(p.read_text()) for p in tmp_path.glob("exit.*.txt")}
    assert len(at_exit) == 3, at_exit
    if route == "run memory":
        return  # memory mode counts bytes, not calls
    children = [
        p
        for p in tmp_path.glob("out.*.json")
        if p.name.split(".")[1] in {n.split(".")[1] for n in at_exit}
    ]
    assert sorted(_calls(p, "__main__.work") for p in children) == [7, 8, 9], done.stderr


MUTE = """\
import gc, json, os, sys
from profkit.profilers.elt import _native

def leaf():
    return 1

def recorded(rec):
    code = leaf.__code__
    for _ in range(3):
        rec.py_start(code, 0)
        rec.py_return(code, 0, None)
    return sum(row[2] for _, rows in rec.export(10**9)[1] for row in rows)

inherited = _native.Recorder(lambda: ("t", "T"))
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    fresh = _native.Recorder(lambda: ("t", "T"))
    os.write(w, json.dumps([recorded(inherited), recorded(fresh)]).encode())
    os._exit(0)
os.waitpid(pid, 0)
os.close(w)
child = json.loads(os.read(r, 1000))
print(json.dumps({"child": child, "parent": recorded(inherited)}))
"""


def test_a_recorder_inherited_by_a_forked_child_is_mute_there(tmp_path: Path) -> None:
    """The parent's recorder stays registered in a child until profkit's after-fork hook
    replaces it; what runs before (threading's hook, the program's) must not be recorded
    into the parent's tree, which the child drops (writing it copied its pages). A
    recorder made in the child records; the parent's goes on recording in the parent."""
    (tmp_path / "mute.py").write_text(MUTE)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROFKIT_")}
    done = subprocess.run(
        [sys.executable, "mute.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"child": [0, 3], "parent": 3}


KEEP = """\
import os, sys
import profkit.collect as collect
os.environ["CHANGED"] = "1"  # not the environment the parent's profiler was made from
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    kept = collect._inherited
    os.write(w, f"{len(kept)} {kept[0].active if kept else None}".encode())
    os._exit(0)
os.waitpid(pid, 0)
os.close(w)
print(os.read(r, 100).decode())
"""


def test_a_forked_child_keeps_the_parents_session_without_tearing_it_down(
    tmp_path: Path,
) -> None:
    """The dropped session is kept (inactive), not freed: freeing the parent's call tree
    and tables wrote to every page of them in each child. (A child whose environment is
    the parent's keeps the session itself, reset in place: test_fork_reset.py.)"""
    (tmp_path / "keep.py").write_text(KEEP)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROFKIT_")} | {
        "PROFKIT_ENABLE_PROFILING": "1",
        "PROFKIT_PROFILER": "elt",
        "PROFKIT_TREE": "0",
        "PROFKIT_OUTPUT": "out.{pid}.json",
    }
    done = subprocess.run(
        [sys.executable, "keep.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "False"]
