"""C functions as nodes of their own (issue #11 item 2): names, counts, self times, the
caller rule, ``--no-c-calls``, and the C recorder's own ``sys.monitoring`` tool."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from profkit.calltree.file import load
from profkit.calltree.model import CallNode, CallProfile
from profkit.profilers.elt import native

PROGRAM = textwrap.dedent(
    """
    import json, os, sys
    def work(path):
        d = {i: str(i) for i in range(50)}
        for i in range(7):
            d.get(i)
        x = sorted(d.values())
        with open(path, "w") as f:
            for _ in range(3):
                f.write("x")
        json.dumps(d)  # json.encoder (filtered with --prefix) calls C functions too
        return len(x)
    print(work(sys.argv[1]))
    """
)


@pytest.fixture(autouse=True)
def hot_path() -> str:
    """Whole runs pick their path by PROFKIT_NATIVE (overrides the conftest's both-ways run)."""
    return "native"


def _run(tmp_path: Path, *flags: str, native_mode: str = "auto") -> CallProfile:
    (tmp_path / "prog.py").write_text(PROGRAM)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROFKIT_")}
    env["PROFKIT_NATIVE"] = native_mode
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "profkit",
            "run",
            "--no-tree",
            *flags,
            "-o",
            "p.json",
            "prog.py",
            str(tmp_path / "out.txt"),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "50\n"
    return load(tmp_path / "p.json")


def _children(profile: CallProfile, name: str) -> dict[str, CallNode]:
    """The children of the first node named ``name``, by name."""
    names = [f.name for f in profile.frames]
    for thread in profile.threads:
        for _, node in thread.root.walk():
            if node.frame >= 0 and names[node.frame] == name:
                return {names[c.frame]: c for c in node.children.values()}
    raise AssertionError(f"{name} not found in {names}")


@pytest.mark.parametrize("native_mode", ["auto", "off"])
def test_c_functions_are_nodes_under_their_caller(tmp_path: Path, native_mode: str) -> None:
    if native_mode == "auto" and not native.available():
        pytest.skip("the C recorder is not built")
    profile = _run(tmp_path, native_mode=native_mode)
    kids = _children(profile, "__main__.work")
    assert kids["dict.get"].calls == 7
    assert kids["builtins.sorted"].calls == 1
    assert kids["TextIOWrapper.write"].calls == 3
    work = next(
        n
        for t in profile.threads
        for _, n in t.root.walk()
        if n.frame >= 0 and profile.frames[n.frame].name == "__main__.work"
    )
    # the C calls' time is out of work's self time
    assert work.exclusive_ns == work.inclusive_ns - sum(
        c.inclusive_ns for c in work.children.values()
    )
    for name in ("dict.get", "builtins.sorted", "TextIOWrapper.write"):
        frame = next(f for f in profile.frames if f.name == name)
        assert (frame.file, frame.line) == ("", 0)


def test_no_c_calls_hides_them(tmp_path: Path) -> None:
    profile = _run(tmp_path, "--no-c-calls")
    names = {f.name for f in profile.frames}
    assert "__main__.work" in names
    assert not names & {"dict.get", "builtins.sorted", "TextIOWrapper.write"}


def test_the_prefix_applies_to_the_python_caller(tmp_path: Path) -> None:
    profile = _run(tmp_path, "--prefix", "__main__")
    kids = _children(profile, "__main__.work")
    assert kids["dict.get"].calls == 7
    # json.dumps (filtered) ran C code (the encoder's helpers): none of it is shown
    python = {f.name for f in profile.frames if f.file}
    assert all(n.startswith("__main__.") for n in python), python
    assert not any(f.name.startswith("_json.") for f in profile.frames)


# -- the C recorder's own tool (3.12+) ---------------------------------------------------

needs_monitoring = pytest.mark.skipif(
    not hasattr(sys, "monitoring") or not native.available(),
    reason="the C recorder's C-call callbacks are for sys.monitoring (3.12+)",
)


def _recorder() -> Any:
    assert native.Recorder is not None
    return native.Recorder(lambda: ("t", "T"))


@needs_monitoring
def test_recorder_caller_rule_and_names() -> None:
    rec = _recorder()
    code = (lambda: 0).__code__
    other = (lambda: 1).__code__
    rec.enter(id(code))
    rec.c_call(code, 0, sorted, None)
    rec.c_return(code, 0, sorted, None)
    rec.c_call(other, 0, len, None)  # called by code that is not on top: not recorded
    rec.c_return(other, 0, len, None)
    rec.c_call(code, 0, str.join, ",")  # the descriptor and the bound method: one node
    rec.c_return(code, 0, str.join, ",")
    joiner = ",".join
    rec.c_call(code, 0, joiner, None)
    rec.c_return(code, 0, joiner, None)
    rec.c_call(code, 0, dict.fromkeys, None)
    rec.c_return(other, 0, dict.fromkeys, None)  # another caller's return: not ours
    rec.c_return(code, 0, dict.fromkeys, None)
    rec.c_call(code, 0, (lambda: 0), None)  # a Python function: its own events, not C
    rec.c_call(code, 0, int, None)  # a type: not a C function either
    rec.leave(id(code))
    names = rec.c_names
    closed, threads = rec.export(0)
    ((_, rows),) = threads
    root = native.tree_of(rows)
    (caller,) = root.children.values()
    counts = {names[fid]: node.calls for fid, node in caller.children.items()}
    assert counts == {"builtins.sorted": 1, "str.join": 2, "dict.fromkeys": 1}
    assert closed == 0


@needs_monitoring
def test_tool_is_released_when_recording_stops() -> None:
    from profkit.profilers.elt.ccalls import MonitoringHook

    mon: Any = sys.monitoring  # type: ignore[attr-defined]
    hook = MonitoringHook(_recorder())
    assert hook.start()
    tool = hook.tool
    assert tool is not None and mon.get_tool(tool) == "profkit-c-calls"
    hook.stop()
    hook.stop()
    assert mon.get_tool(tool) is None


@needs_monitoring
def test_a_forked_child_releases_the_parents_tool() -> None:
    from profkit.profilers.elt.ccalls import MonitoringHook
    from tests.collect.children import wait_or_kill

    mon: Any = sys.monitoring  # type: ignore[attr-defined]
    hook = MonitoringHook(_recorder())
    assert hook.start()
    tool = hook.tool
    try:
        pid = os.fork()
        if pid == 0:  # the child: the inherited tool is free again
            os._exit(0 if mon.get_tool(tool) is None and hook.tool is None else 1)
        assert wait_or_kill(pid, 30) == 0
        assert mon.get_tool(tool) == "profkit-c-calls"  # the parent keeps it
    finally:
        hook.stop()


@needs_monitoring
def test_a_profiler_dropped_without_detaching_frees_its_tool_id() -> None:
    """The recorder's C-call callbacks sit in sys.monitoring's registry for the whole
    process: they must not keep the profiler (and so its tool id) alive once it is dropped,
    or cProfile later finds "Another profiling tool is already active"."""
    import gc

    from tests.profilers.elt.test_profiler import make

    mon: Any = sys.monitoring  # type: ignore[attr-defined]
    before = {t: mon.get_tool(t) for t in range(6)}
    prof, driver, _lines = make()
    with driver.call("app.main", 10):
        driver.leaf("app.work", 20)
    taken = [t for t in range(6) if mon.get_tool(t) == "profkit-c-calls" and before[t] is None]
    del prof, driver, _lines
    gc.collect()
    assert {t: mon.get_tool(t) for t in range(6)} == before, taken


CLAIMING = textwrap.dedent(
    """
    import sys
    def work():
        d = {i: i for i in range(9)}
        for i in range(7):
            d.get(i)
        return sorted(d)
    def claim(ids):
        for tool in ids:
            try:
                sys.monitoring.use_tool_id(tool, "program")
            except ValueError:
                print(tool, "refused")
            else:
                print(tool, sys.monitoring.get_tool(tool))
        work()
    claim(int(t) for t in sys.argv[1].split(","))
    """
)


@needs_monitoring
@pytest.mark.parametrize("claims", ["0", "1", "2", "3", "4", "5", "5,4,3", "0,1,2,3"])
def test_a_program_claiming_a_tool_id_gets_it_and_c_calls_are_still_recorded(
    tmp_path: Path, claims: str
) -> None:
    """However the program claims ids by number, each claim succeeds while an id is free
    (profkit's three tools move out of the way), and the C calls made after the moves are
    in the profile. A fourth claim gets the C-call tool's id (issue 22, item 14): the
    collector keeps two, and C calls are no longer nodes."""
    (tmp_path / "prog.py").write_text(CLAIMING)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROFKIT_")}
    proc = subprocess.run(
        [sys.executable, "-m", "profkit", "run", "--no-tree", "-o", "p.json", "prog.py", claims],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    ids = [int(t) for t in claims.split(",")]
    free_left = 6 - 2  # profkit holds three ids, and gives up the C-call tool's last
    expected = [f"{t} {'program' if i < free_left else 'refused'}" for i, t in enumerate(ids)]
    assert proc.stdout.splitlines() == expected
    kids = _children(load(tmp_path / "p.json"), "__main__.work")
    if len(ids) > 3:
        assert "dict.get" not in kids  # the C-call tool was given up to the program
        return
    assert kids["dict.get"].calls == 7
    assert kids["builtins.sorted"].calls == 1


@needs_monitoring
def test_without_event_lines_a_c_node_costs_no_more_than_a_python_one() -> None:
    """Only event lines read a node's own name: without them a C node keeps no str and no
    name-table entry (they were ~100 bytes a C node, ~40 MB of a large 3.12 run's peak).
    The same 5,000 distinct paths, each ending in a C call or in a Python one: the same
    traced memory, give or take a few bytes a node."""
    import tracemalloc

    code = (lambda: 0).__code__
    depth = 5_000

    def traced(c_leaf: bool) -> int:
        rec = _recorder()
        tracemalloc.start()
        try:
            for _ in range(depth):  # each level a new path, each with its own leaf
                rec.enter(id(code))
                if c_leaf:
                    rec.c_call(code, 0, sorted, None)
                    rec.c_return(code, 0, sorted, None)
                else:
                    rec.enter(1)
                    rec.leave(1)
            grown = tracemalloc.get_traced_memory()[0]
        finally:
            tracemalloc.stop()
        for _ in range(depth):
            rec.leave(id(code))
        assert rec.c_names or not c_leaf  # the function is still named, once
        return grown

    python, c = traced(False), traced(True)
    assert c - python < 8 * depth, (c, python)
