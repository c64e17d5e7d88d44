"""What a fork costs a profiled program, beside the same program run bare (issue 22, item 13).

A program forks ``--forks`` children one after another and waits for each; every child
either leaves at once through ``os._exit(0)`` (``--ending _exit``: the cost of profkit's
after-fork hooks alone, a fresh profiler attached in the child) or returns normally
(``--ending exit``: the child also saves its profile, as every profiled child does).
Rows, all measured in this run and interleaved round by round so that load drifting on a
shared machine hits every row alike:

* ``bare``        ``python forker.py``
* ``run``         ``profkit run --no-tree`` (trace mode; children attach through the environment)
* ``run memory``  ``profkit run --mode memory --no-tree``
* ``env``         ``PROFKIT_ENABLE_PROFILING=1 PROFKIT_PROFILER=elt python forker.py``

Per row: the median wall time of one fork (``os.fork()`` to ``waitpid`` returning) and the
median CPU time of one child (user + system, from ``wait4``: what the child itself cost,
which a loaded machine does not inflate as it inflates wall time), each with its excess
over bare, and the child's minor page faults: on a virtual machine each page the child
writes that it shares with its parent is copied at a few microseconds, and these copies
are most of a child's cost (the Python it runs after the fork is 1-4 M instructions).
Target: ≤ 5 ms per child over bare.

``--instructions`` counts instead, with callgrind (stable on a loaded machine), the
instructions a child spends in ``PyOS_AfterFork_Child`` (every after-fork hook, profkit's
reset or re-attach among them) when it leaves with ``_exit``, and when it returns normally
all it spends after the fork, with the interpreter's finalization (``Py_FinalizeEx``) apart.

    python bench/fork_bench.py                      # 20 forks, 3 rounds, both endings
    python bench/fork_bench.py --forks 100 --rounds 1 --ending _exit
    python bench/fork_bench.py --instructions       # needs valgrind
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

FORKER = """\
import os, sys, time
n, ending = int(sys.argv[1]), sys.argv[2]
wall, cpu, faults = [], [], []
for _ in range(n):
    start = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        if ending == "_exit":
            os._exit(0)
        sys.exit(0)
    _, status, usage = os.wait4(pid, 0)
    wall.append(time.perf_counter() - start)
    cpu.append(usage.ru_utime + usage.ru_stime)
    faults.append(usage.ru_minflt)
    assert status == 0, status
import json  # not before: a child that saves its profile may need it, as in a program without it

with open(os.environ["FORK_BENCH_OUT"], "w") as f:
    json.dump({"wall": wall, "cpu": cpu, "faults": faults}, f)
"""


def _rows(python: str) -> dict[str, tuple[list[str], dict[str, str]]]:
    run = [python, "-m", "profkit", "run", "--no-tree", "-o", "out.json"]
    return {
        "bare": ([python, "forker.py"], {}),
        "run": ([*run, "forker.py"], {}),
        "run memory": ([*run[:4], "--mode", "memory", *run[4:], "forker.py"], {}),
        "env": (
            [python, "forker.py"],
            {
                "PROFKIT_ENABLE_PROFILING": "1",
                "PROFKIT_PROFILER": "elt",
                "PROFKIT_TREE": "0",
                "PROFKIT_OUTPUT": "env.json",
            },
        ),
    }


def _clean_env() -> dict[str, str]:
    """This environment without profkit's variables, and with bytecode files written: a
    stale or missing one is otherwise compiled again in every process (and child) that
    imports the module, which is no user's normal case (PYTHONDONTWRITEBYTECODE)."""
    drop = ("PROFKIT_", "PYTHONDONTWRITEBYTECODE")
    return {k: v for k, v in os.environ.items() if not k.startswith(drop)}


def _measure(
    cmd: list[str], extra: dict[str, str], forks: int, ending: str, work: Path
) -> dict[str, list[float]]:
    out = work / "times.json"
    env = _clean_env() | extra | {"FORK_BENCH_OUT": str(out)}
    subprocess.run([*cmd, str(forks), ending], cwd=work, env=env, check=True, capture_output=True)
    for stale in work.glob("*.json"):
        if stale != out:
            stale.unlink()
    result: dict[str, list[float]] = json.loads(out.read_text())
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--forks", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ending", choices=["_exit", "exit", "both"], default="both")
    parser.add_argument("--instructions", action="store_true", help="callgrind counts")
    args = parser.parse_args()
    endings = ["_exit", "exit"] if args.ending == "both" else [args.ending]
    rows = _rows(args.python)
    if args.instructions:
        return _instructions(rows)
    with tempfile.TemporaryDirectory(prefix="fork_bench") as tmp:
        work = Path(tmp)
        (work / "forker.py").write_text(FORKER)
        for ending in endings:
            wall: dict[str, list[float]] = {name: [] for name in rows}
            cpu: dict[str, list[float]] = {name: [] for name in rows}
            faults: dict[str, list[float]] = {name: [] for name in rows}
            for _ in range(args.rounds):
                for name, (cmd, extra) in rows.items():
                    got = _measure(cmd, extra, args.forks, ending, work)
                    wall[name] += got["wall"]
                    cpu[name] += got["cpu"]
                    faults[name] += got["faults"]
            _print(ending, args, wall, cpu, faults)
    return 0


def _print(
    ending: str,
    args: argparse.Namespace,
    wall: dict[str, list[float]],
    cpu: dict[str, list[float]],
    faults: dict[str, list[float]],
) -> None:
    print(f"child ends with {ending}: {args.forks} forks x {args.rounds} rounds ({args.python})")
    bare_wall = statistics.median(wall["bare"]) * 1e3
    bare_cpu = statistics.median(cpu["bare"]) * 1e3
    head = f"  {'row':12} {'wall/fork':>10} {'over bare':>10} {'cpu/child':>10} {'over bare':>10}"
    print(head + f" {'faults':>7}")
    for name in wall:
        w = statistics.median(wall[name]) * 1e3
        c = statistics.median(cpu[name]) * 1e3
        f = statistics.median(faults[name])
        print(
            f"  {name:12} {w:8.2f}ms {w - bare_wall:+8.2f}ms {c:8.2f}ms {c - bare_cpu:+8.2f}ms"
            f" {f:7.0f}"
        )


def _instructions(rows: dict[str, tuple[list[str], dict[str, str]]]) -> int:
    """Each row's instructions per child (callgrind, two children of each ending): with
    ``_exit``, in ``PyOS_AfterFork_Child``; with ``exit``, all the child's after the fork,
    and of those the interpreter's finalization (``Py_FinalizeEx``)."""
    if shutil.which("valgrind") is None or shutil.which("callgrind_annotate") is None:
        print("fork_bench: --instructions needs valgrind (callgrind, callgrind_annotate)")
        return 2
    print("instructions per child (callgrind): _exit: in PyOS_AfterFork_Child (every after-fork")
    print("hook); exit: the whole child after the fork / of which Py_FinalizeEx")
    for name, (cmd, extra) in rows.items():
        found: list[str] = []
        for ending in ("_exit", "exit"):
            for counts in _grind(cmd, extra, ending):
                if ending == "_exit":
                    found.append(f"{counts['PyOS_AfterFork_Child']:>11,}")
                else:
                    found.append(f"{counts['']:>11,} / {counts['Py_FinalizeEx']:>10,}")
        print(f"  {name:12} _exit {' '.join(found[:2])}   exit {' '.join(found[2:])}")
    return 0


def _grind(cmd: list[str], extra: dict[str, str], ending: str) -> list[dict[str, int]]:
    """Run ``cmd`` forking two children under callgrind, counting from each child's
    ``PyOS_AfterFork_Child``: per child, its total ('') and inclusive counts."""
    with tempfile.TemporaryDirectory(prefix="fork_bench_cg") as tmp:
        work = Path(tmp)
        (work / "forker.py").write_text(FORKER)
        grind = ["valgrind", "--tool=callgrind", "-q", "--zero-before=PyOS_AfterFork_Child"]
        grind.append(f"--callgrind-out-file={work}/cg.%p")
        env = _clean_env() | extra | {"FORK_BENCH_OUT": str(work / "times.json")}
        subprocess.run(
            [*grind, *cmd, "2", ending], cwd=work, env=env, check=True, capture_output=True
        )
        dumps = sorted(work.glob("cg.*"), key=lambda p: p.stat().st_mtime)[:-1]  # children
        return [
            {f: _inclusive(dump, f or None) for f in ("", "PyOS_AfterFork_Child", "Py_FinalizeEx")}
            for dump in dumps
        ]


def _inclusive(dump: Path, function: str | None) -> int:
    """Inclusive instructions of ``function`` in a callgrind dump (None: the dump's total;
    0: not found)."""
    text = subprocess.run(
        ["callgrind_annotate", "--inclusive=yes", str(dump)], capture_output=True, text=True
    ).stdout
    if function is None:
        found = re.search(r"^\s*([\d,]+)\s.*PROGRAM TOTALS", text, re.M)
    else:
        found = re.search(rf"^\s*([\d,]+)\s.*:{function}\b", text, re.M)
    return int(found.group(1).replace(",", "")) if found else 0


if __name__ == "__main__":
    raise SystemExit(main())
