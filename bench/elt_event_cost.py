"""Trace mode's cost per event, in instructions (callgrind), beside cProfile's.

    python bench/elt_event_cost.py                      # this interpreter
    python bench/elt_event_cost.py --python .venv312/bin/python --python .venv313/bin/python
    python bench/elt_event_cost.py --annotate            # + profkit's functions, per event

Each workload runs whole (``python script``, ``python -m cProfile``, ``profkit run``)
under callgrind at two sizes, N and 2N calls; the difference between the two is the cost
of N more calls and nothing else (start-up, the end-of-run export and the exit are the
same at both sizes: the call tree does not grow). Divided by the events of N calls, the
tool's cost over bare's is its cost per event, the interpreter's own part (a frame
object for the profile function, the event's dispatch: cProfile pays it too) included.

Why: ``--real --instructions`` (elt_bench.py) says how far the whole sympy run is from
cProfile's, in minutes; this says what one event costs, in seconds, so that a change of
the recorder's hot path shows as a number of instructions an event. Workloads:

* ``python``: a loop calling a small Python function (2 events a call: call, return);
* ``ccalls``: a loop calling a Python function that calls two C functions (6 events a
  call on 3.11's setprofile, PY_START/PY_RETURN and CALL/C_RETURN on 3.12+; C functions
  are nodes by default).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

WORKLOADS: dict[str, tuple[str, int]] = {
    # name: (program taking N from argv, events per loop turn)
    "python": (
        """
import sys
def f(x):
    return x + 1
def main(n):
    s = 0
    for i in range(n):
        s = f(s)
    return s
main(int(sys.argv[1]))
""",
        2,
    ),
    "ccalls": (
        """
import sys
def f(x, seq):
    seq.append(x)
    return len(seq)
def main(n):
    seq = []
    for i in range(n):
        f(i, seq)
        if len(seq) > 64:
            seq = []
    return seq
main(int(sys.argv[1]))
""",
        8,  # f: call+return; append, len in f, len in main: c_call+c_return each
    ),
}

N = 50_000
#: a row of callgrind_annotate's function list
_ROW = re.compile(r"^\s*([\d,]+)\s+(?:\(\s*[\d.]+%\)\s+)?(\S.*)$")


def _total(dump: Path) -> int:
    for line in dump.read_text(errors="replace").splitlines():
        if line.startswith(("summary:", "totals:")):
            return int(line.split()[1])
    raise SystemExit(f"no summary in {dump}")


def _grind(cmd: list[str], out: str, env: dict[str, str]) -> int:
    # Byte code written, and profkit's calibration cache filled (calcache.MIN_RUNS runs
    # measure; after a rebuild too): a run that measures costs ~30 M instructions more.
    for _ in range(4):
        subprocess.run(cmd, env=env, capture_output=True, check=True)
    grind = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *cmd]
    subprocess.run(grind, env=env, capture_output=True, check=True)
    return _total(Path(out))


def _annotate(out_small: str, out_big: str, events: int) -> None:
    """profkit's own functions (self instructions), per event: big run minus small run."""

    def selfs(dump: str) -> dict[str, int]:
        text = subprocess.run(
            ["callgrind_annotate", "--threshold=100", "--auto=no", dump],
            capture_output=True,
            text=True,
        ).stdout
        found: dict[str, int] = {}
        for line in text.splitlines():
            # "1,234 ( 5.6%)  file:function [object]": the share differs between runs
            hit = _ROW.match(line)
            if hit:
                count, name = int(hit[1].replace(",", "")), hit[2]
                found[name] = found.get(name, 0) + count
        return found

    small, big = selfs(out_small), selfs(out_big)
    rows = sorted(((big.get(k, 0) - small.get(k, 0)) / events, k) for k in big)
    for per, name in reversed(rows):
        if per >= 1.0:
            print(f"      {per:7.1f}  {name[:110]}")


def measure(python: str, annotate: bool, workloads: list[str]) -> None:
    version = subprocess.run(
        [python, "-c", "import sys; print(sys.version.split()[0])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROFKIT_")}
    env["PYTHONHASHSEED"] = "0"
    with tempfile.TemporaryDirectory(prefix="profkit-event-cost-") as tmp:
        for name in workloads:
            program, per_turn = WORKLOADS[name]
            script = os.path.join(tmp, f"{name}.py")
            Path(script).write_text(program)
            tools = {
                "bare": [python, script],
                "cProfile": [python, "-m", "cProfile", "-o", os.path.join(tmp, "p.pstats"), script],
                "profkit trace": [
                    python,
                    "-m",
                    "profkit",
                    "run",
                    "-o",
                    os.path.join(tmp, "p.json"),
                    script,
                ],
            }
            events = N * per_turn
            per_event: dict[str, float] = {}
            dumps: dict[str, tuple[str, str]] = {}
            for tool, cmd in tools.items():
                small = os.path.join(tmp, f"{name}.{len(per_event)}.small")
                big = os.path.join(tmp, f"{name}.{len(per_event)}.big")
                diff = _grind([*cmd, str(2 * N)], big, env) - _grind([*cmd, str(N)], small, env)
                per_event[tool] = diff / events
                dumps[tool] = (small, big)
            bare = per_event["bare"]
            c_added = per_event["cProfile"] - bare
            print(f"\n{version} {name}: instructions per event ({events} events: N={N} more)")
            for tool, per in per_event.items():
                added = per - bare
                ratio = f"{added / c_added:6.2f}× cP" if tool != "bare" and c_added > 0 else ""
                print(f"  {tool:<14}{per:9.1f}  added {added:7.1f}  {ratio}")
            if annotate:
                print("    profkit's run, self instructions per event (2N run - N run):")
                _annotate(*dumps["profkit trace"], events)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--python", action="append", help="interpreter(s) (default: this one)")
    parser.add_argument("--annotate", action="store_true", help="profkit's functions per event")
    parser.add_argument("--workload", action="append", choices=sorted(WORKLOADS))
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        print("needs valgrind (callgrind)")
        return 1
    for python in args.python or [sys.executable]:
        measure(python, args.annotate, args.workload or list(WORKLOADS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
