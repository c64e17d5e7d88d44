"""The pstats export's callers against cProfile's, on recursive programs.

snakeviz, gprof2dot and ``pstats.print_callers`` read a callee's callers as
``(nc, cc, tt, ct)`` per caller, with ``cc`` counting the outermost activations *of
that edge* (``_lsprof``'s sub-entry recursion). The oracle is cProfile on the same
program in the same test: call counts must be equal; times are not compared (they are
two runs' times), except that an edge's inclusive time is non-zero where cProfile's is.
"""

from __future__ import annotations

import pstats
import subprocess
import sys
from pathlib import Path

import pytest

PROGRAM = """
def f(n):
    return 0 if n == 0 else g(n) + f(n - 1)

def g(n):
    return n % 3

def a(n):
    return b(n - 1) if n else 0

def b(n):
    return a(n - 1) if n else 0

for _ in range(40):
    f(60)
    a(30)
"""

Callers = dict[str, dict[str, tuple[int, int]]]


def _callers(path: Path) -> tuple[Callers, dict[str, dict[str, float]]]:
    """callee name -> caller name -> (nc, cc), and the callers' inclusive times."""
    stats = pstats.Stats(str(path)).stats  # type: ignore[attr-defined]
    counts: Callers = {}
    times: dict[str, dict[str, float]] = {}
    for (_file, _line, name), (_cc, _nc, _tt, _ct, callers) in stats.items():
        short = name.rsplit(".", 1)[-1]
        if short not in {"f", "g", "a", "b"}:
            continue
        for (_f2, _l2, caller), (nc, cc, _t, ct) in callers.items():
            caller = caller.rsplit(".", 1)[-1]
            counts.setdefault(short, {})[caller] = (nc, cc)
            times.setdefault(short, {})[caller] = ct
    return counts, times


@pytest.mark.parametrize("recursion", ["direct", "mutual"])
def test_callers_equal_cprofiles(tmp_path: Path, recursion: str) -> None:
    script = tmp_path / "rec.py"
    script.write_text(PROGRAM)
    oracle = tmp_path / "oracle.pstats"
    ours = tmp_path / "ours.pstats"
    subprocess.run([sys.executable, "-m", "cProfile", "-o", str(oracle), str(script)], check=True)
    subprocess.run(
        [sys.executable, "-m", "profkit", "run", "--no-tree", "-o", str(ours), str(script)],
        check=True,
        capture_output=True,
    )
    want, want_times = _callers(oracle)
    got, got_times = _callers(ours)
    callees = ["f", "g"] if recursion == "direct" else ["a", "b"]
    for callee in callees:
        assert got[callee] == want[callee], callee
        for caller, seconds in want_times[callee].items():
            assert (got_times[callee][caller] > 0) == (seconds > 0), (callee, caller)
    if recursion == "direct":
        assert want["f"]["f"] == (40 * 60, 40)  # the shape: nc/cc = 2400/40
