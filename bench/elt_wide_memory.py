"""Trace mode's peak memory on a wide call tree against cProfile's and bare's, same run.

The recorder's cost in memory is per call-tree node (a node per distinct call path, plus
its slot in the thread's node table), so the program here makes ~1.01 million of them
cheaply: 100 functions of distinct code, each calling all 100, three levels deep (1.01 M
calls). cProfile keeps one entry per (caller, callee) pair, 10,000 here: this is the
recorder's worst case against it, not a typical program (``elt_bench.py --real --pytest``
is the typical large one). Peak RSS from the child's rusage, one run each.

    python bench/elt_wide_memory.py [--python PY ...]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

PROGRAM = """\
src = "\\n".join(
    f"def f{i}(d):\\n    if d:\\n        for g in fs:\\n            g(d - 1)\\n" for i in range(100)
)
exec(src)
fs = [globals()[f"f{i}"] for i in range(100)]
fs[0](3)
"""


def _run(cmd: list[str]) -> tuple[float, float]:
    """(peak RSS MB, CPU s) of one run."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROFKIT_")}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}")
    return usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime


def bench(python: str) -> None:
    with tempfile.TemporaryDirectory(prefix="profkit-wide-") as tmp:
        script = os.path.join(tmp, "wide.py")
        Path(script).write_text(PROGRAM)
        out = os.path.join(tmp, "out")
        rows = {
            "bare": [python, script],
            "cProfile -o": [python, "-m", "cProfile", "-o", out + ".pstats", script],
            "profkit trace": [python, "-m", "profkit", "run", "--no-tree", "-o", out, script],
        }
        got = {name: _run(cmd) for name, cmd in rows.items()}
    print(f"\n{python}: ~1.01 M call-tree nodes, one run each")
    bare, cprofile = got["bare"][0], got["cProfile -o"][0]
    for name, (rss, cpu) in got.items():
        print(
            f"  {name:<15}{rss:>8.1f} MB{cpu:>7.2f} s CPU   peak x cProfile {rss / cprofile:5.2f}"
            f"   added MB {rss - bare:7.1f}"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--python", action="append", help="interpreter(s) (default: this one)")
    for python in parser.parse_args().python or [sys.executable]:
        bench(python)
    return 0


if __name__ == "__main__":
    sys.exit(main())
