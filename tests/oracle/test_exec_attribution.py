"""Whose time is ``builtins.exec``'s: profkit against cProfile, run on the same program here.

``exec`` is the caller of every module body an import runs, so whatever profkit does when it
first sees a module's code lands in ``exec``'s self time. On sympy (3.12) that was 2.10 s
against cProfile's 0.39 s: profkit rescanned all of ``sys.modules`` at each import to name
the new module's functions, O(modules²) in all. The oracle is cProfile's share of the run
spent in ``exec`` itself; profkit's may exceed it only by what its one-time discovery of a
module costs. Shares, not times, and the best of three runs: the machine may be loaded.
"""

from __future__ import annotations

import pstats
import subprocess
import sys
from pathlib import Path

import pytest

from profkit.calltree.file import load
from profkit.calltree.model import CallNode

MODULES = 600

MODULE = """
import math
def f_{i}(x):
    return math.sqrt(x) + {i}
def g_{i}(x):
    return [f_{i}(v) for v in range(x)]
class C_{i}:
    def m(self):
        return g_{i}(3)
VALUE = C_{i}().m()
"""

MAIN = f"""
import importlib, os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
def main():
    for i in range({MODULES}):
        importlib.import_module(f"pk_mod_{{i}}")
main()
"""


@pytest.fixture
def program(tmp_path: Path) -> Path:
    for i in range(MODULES):
        (tmp_path / f"pk_mod_{i}.py").write_text(MODULE.format(i=i))
    main = tmp_path / "main.py"
    main.write_text(MAIN)
    return main


def _cprofile_share(program: Path) -> float:
    out = program.parent / "c.pstats"
    subprocess.run(
        [sys.executable, "-m", "cProfile", "-o", str(out), str(program)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    stats = pstats.Stats(str(out))
    raw = stats.stats  # type: ignore[attr-defined]
    (key,) = [k for k in raw if k[2] == "<built-in method builtins.exec>"]
    return float(raw[key][2] / stats.total_tt)  # type: ignore[attr-defined]


def _profkit_share(program: Path) -> float:
    out = program.parent / "p.json"
    done = subprocess.run(
        [sys.executable, "-m", "profkit", "run", "--no-tree", "-o", str(out), str(program)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    profile = load(out)
    exec_self = 0

    def walk(node: CallNode) -> None:
        nonlocal exec_self
        for child in node.children.values():
            if profile.frames[child.frame].name == "builtins.exec":
                exec_self += child.exclusive_ns
            walk(child)

    total = 0
    for thread in profile.threads:
        walk(thread.root)
        total += sum(c.inclusive_ns for c in thread.root.children.values())
    assert exec_self > 0, "exec is a node of its own (C calls are shown by default)"
    return exec_self / total


def test_module_bodies_time_is_not_charged_to_exec(program: Path) -> None:
    oracle = _cprofile_share(program)
    shares = []
    for _ in range(3):
        shares.append(_profkit_share(program))
        if shares[-1] <= oracle + 0.10:
            break
    # Before the fix: ~50 % of the run in exec's self time (cProfile: under 5 %).
    assert min(shares) <= oracle + 0.10, (oracle, shares)
