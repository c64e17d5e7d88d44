"""A forked child's profiler reset in place (issue 22, item 13).

When the start-up hook attached the parent's profiler and would attach the same one in the
child, the child keeps the parent's session, hooks and tables, and the profiler starts
afresh there (``startup.resume_in_child``, ``Session.reset_after_fork``, the C recorder's
``reset_after_fork``) instead of a new session being built. What is asserted: each
process's profile holds its own calls and only those (the child's: what it ran after the
fork; the parent's: unchanged by its children), wherever the fork happens (deep in a call
stack, on a thread, in a child of a child), and that the reset was the route taken. The
costs are ``bench/fork_bench.py``'s.
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

ENV = {
    "PROFKIT_ENABLE_PROFILING": "1",
    "PROFKIT_PROFILER": "elt",
    "PROFKIT_TREE": "0",
    "PROFKIT_OUTPUT": "out.{pid}.json",
}

# Helpers every program below starts with. ``end`` saves this process's profile (detach:
# shutdown saves it) and leaves without running the parent's code any further; ``route``
# tells whether the parent's session went on (reset in place) or a new one was attached.
PRELUDE = """\
import json, os, sys, threading
import profkit.collect as collect

def parent_work():
    return 1

def child_work():
    return 2

def grandchild_work():
    return 3

def route(before):
    now = collect.current_session()
    return "reset" if now is before and not collect._inherited else "new"

def end(name, before):
    with open(name, "w") as f:
        f.write(json.dumps([os.getpid(), route(before)]))
    collect.detach()
    os._exit(0)

session = collect.current_session()
"""

PLAIN = """\
for _ in range(5):
    parent_work()
pid = os.fork()
if pid == 0:
    for _ in range(3):
        child_work()
    end("child.json", session)
os.waitpid(pid, 0)
for _ in range(2):
    parent_work()
"""

DEEP = """\
def deep(n):
    if n:
        return deep(n - 1)
    pid = os.fork()
    if pid == 0:
        for _ in range(3):
            child_work()
    return pid

pid = deep(60)
if pid == 0:
    for _ in range(4):
        child_work()  # back at the top, past the 61 frames entered in the parent
    end("child.json", session)
os.waitpid(pid, 0)
parent_work()
"""

THREAD = """\
def fork_here():
    pid = os.fork()
    if pid == 0:
        for _ in range(3):
            child_work()
        end("child.json", session)
    os.waitpid(pid, 0)

t = threading.Thread(target=fork_here)
t.start()
t.join()
parent_work()
"""

NESTED = """\
parent_work()
pid = os.fork()
if pid == 0:
    child_session = collect.current_session()
    child_work()
    grand = os.fork()
    if grand == 0:
        for _ in range(4):
            grandchild_work()
        end("grandchild.json", child_session)
    os.waitpid(grand, 0)
    child_work()
    end("child.json", session)
os.waitpid(pid, 0)
parent_work()
"""

ENV_CHANGED = """\
os.environ["PROFKIT_OUTPUT"] = "changed.{pid}.json"
pid = os.fork()
if pid == 0:
    child_work()
    end("child.json", session)
os.waitpid(pid, 0)
"""


HELPERS = {"__main__.route", "__main__.end", "__main__.<module>"}


def _calls(path: Path) -> dict[str, int]:
    """Calls per function name of one saved profile (the program's functions only)."""
    profile = profile_file.load(path)
    counts: dict[str, int] = {}
    for thread in profile.threads:
        for _, node in thread.root.walk():
            if node.frame is not None:
                name = profile.frames[node.frame].name
                if name.startswith("__main__.") and name not in HELPERS:
                    short = name.removeprefix("__main__.")
                    counts[short] = counts.get(short, 0) + node.calls
    return counts


def _run(tmp_path: Path, body: str) -> dict[str, list[object]]:
    """Run the program (it must exit 0); each forked process's ``[pid, route]`` by role."""
    (tmp_path / "prog.py").write_text(PRELUDE + body)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROFKIT_")} | ENV
    done = subprocess.run(
        [sys.executable, "prog.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return {p.stem: json.loads(p.read_text()) for p in tmp_path.glob("*child.json")}


def _profile_of(tmp_path: Path, pid: object) -> dict[str, int]:
    return _calls(tmp_path / f"out.{pid}.json")


def _parent_profile(tmp_path: Path, children: list[object]) -> dict[str, int]:
    names = {f"out.{pid}.json" for pid in children}
    (parent,) = [p for p in tmp_path.glob("out.*.json") if p.name not in names]
    return _calls(parent)


def _reset_child(tmp_path: Path, body: str) -> tuple[dict[str, int], dict[str, int]]:
    """Run a program forking one child that must take the reset route: (child, parent)."""
    ends = _run(tmp_path, body)
    pid, route = ends["child"]
    assert route == "reset"
    return _profile_of(tmp_path, pid), _parent_profile(tmp_path, [pid])


def test_the_child_records_only_what_it_runs_after_the_fork(tmp_path: Path) -> None:
    child, parent = _reset_child(tmp_path, PLAIN)
    assert child.get("child_work") == 3
    assert "parent_work" not in child
    assert parent.get("parent_work") == 7
    assert "child_work" not in parent


def test_a_fork_deep_in_a_call_stack(tmp_path: Path) -> None:
    """The 61 frames entered in the parent return in the child: their leaves find no
    call of the child's open and are ignored; what the child calls is counted."""
    child, parent = _reset_child(tmp_path, DEEP)
    assert child.get("child_work") == 7
    assert "deep" not in child
    assert parent.get("deep") == 61
    assert "child_work" not in parent


def test_a_fork_from_a_thread(tmp_path: Path) -> None:
    child, parent = _reset_child(tmp_path, THREAD)
    assert child.get("child_work") == 3
    assert "fork_here" not in child  # entered in the parent
    assert parent.get("fork_here") == 1
    assert parent.get("parent_work") == 1
    assert "child_work" not in parent


def test_a_fork_in_a_child_of_a_child(tmp_path: Path) -> None:
    ends = _run(tmp_path, NESTED)
    child_pid, child_route = ends["child"]
    grand_pid, grand_route = ends["grandchild"]
    assert (child_route, grand_route) == ("reset", "reset")
    assert _profile_of(tmp_path, grand_pid) == {"grandchild_work": 4}
    assert _profile_of(tmp_path, child_pid) == {"child_work": 2}
    parent = _parent_profile(tmp_path, [child_pid, grand_pid])
    assert parent == {"parent_work": 2}


def test_a_changed_environment_gets_a_new_profiler(tmp_path: Path) -> None:
    """The child attaches from its own environment, as before: the program set another
    output before forking, so the parent's profiler is not the one to go on with."""
    ends = _run(tmp_path, ENV_CHANGED)
    pid, route = ends["child"]
    assert route == "new"
    assert _calls(tmp_path / f"changed.{pid}.json") == {"child_work": 1}


CHDIR = """\
os.mkdir("sub")
os.chdir("sub")
pid = os.fork()
if pid == 0:
    child_work()
    end("../child.json", session)
os.waitpid(pid, 0)
"""


def test_a_child_in_another_directory_gets_a_new_profiler(tmp_path: Path) -> None:
    """A relative output means where the process was when profiling began: the child of
    a program that changed directory saves there, as before."""
    ends = _run(tmp_path, CHDIR)
    pid, route = ends["child"]
    assert route == "new"
    assert _calls(tmp_path / "sub" / f"out.{pid}.json") == {"child_work": 1}


FIRST_SIGHTS = """\
codes = session._session.catalog.functions.codes
pid = os.fork()  # the parent classifies profkit's after-fork code before its first fork
if pid == 0:
    os._exit(0)
os.waitpid(pid, 0)
before = set(codes)
pid = os.fork()
if pid == 0:
    seen = sorted(codes[f].co_qualname for f in set(codes) - before if "profkit" in codes[f].co_filename)
    with open("child.json", "w") as f:
        f.write(json.dumps([os.getpid(), seen]))
    os._exit(0)
os.waitpid(pid, 0)
"""


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="the setprofile backend's (3.11)")
def test_the_child_meets_no_code_of_profkits_for_the_first_time(tmp_path: Path) -> None:
    """What profkit runs in a child's after-fork hooks once it records there again was
    classified by the parent (``collect._before_fork``): no first sight in the child, whose
    slow path (Python, writing to tables whose pages are the parent's) was most of its
    after-fork cost. ccalls' hook (its module may not import the collector) is the one
    left."""
    _, seen = _run(tmp_path, FIRST_SIGHTS)["child"]
    assert set(seen) <= {"_release_inherited"}, seen
