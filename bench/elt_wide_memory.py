"""Trace mode's peak memory on a wide call tree against cProfile's and bare's, same run.

The recorder's cost in memory is per call-tree node (a node per distinct call path, plus
its slot in the thread's node table), so the program here makes ~1.01 million of them
cheaply: 100 functions of distinct code, each calling all 100, three levels deep (1.01 M
calls). cProfile keeps one entry per (caller, callee) pair, 10,000 here: this is the
recorder's worst case against it, not a typical program (``elt_bench.py --real --pytest``
is the typical large one). Peak RSS from the child's rusage, one run each.

``--phases`` runs ``profkit run`` of the same program once more (or, with ``--pytest``,
pytest on sympy's ``core/tests/test_arit.py``, the bench's large real tree) and prints the
process's resident memory at each phase of the end of the run — the end of recording, the
export, the compensation, the save, the tree's hot spots and its text — with the peak
*within* each phase (Linux: VmHWM, reset between phases through ``/proc/self/clear_refs``).
The run's peak is the largest of them; a phase above "end of recording" adds to it.

    python bench/elt_wide_memory.py [--python PY ...] [--phases [--pytest]]
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


#: The child of ``--phases``: ``profkit run`` in-process, its end-of-run steps wrapped so
#: each prints VmRSS and the peak since the previous mark (then resets the peak).
PHASES = """\
import sys
def mark(what):
    got = dict(line.split(":", 1) for line in open("/proc/self/status") if line[:5] in ("VmRSS", "VmHWM"))
    mb = {k: int(v.split()[0]) / 1024 for k, v in got.items()}
    sys.stderr.write(f"PHASE {what:<34}{mb['VmRSS']:8.1f} MB now{mb['VmHWM']:8.1f} MB peak since last\\n")
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")
def wrap(owner, name, label):
    inner = getattr(owner, name)
    def wrapped(*args, **kwargs):
        mark("before " + label)
        try:
            return inner(*args, **kwargs)
        finally:
            mark("after " + label)
    setattr(owner, name, wrapped)
from profkit.profilers.elt import build
from profkit.report import shown
from profkit.runner import output, session
from profkit.export import destination
wrap(session.Run, "finish", "the end of the run")
wrap(build.Results, "_build_native", "export + compensation")
wrap(build, "compensate_rows", "compensation (a thread)")
wrap(destination.Destination, "save", "save")
wrap(shown, "_self_times_rows", "the tree's hot spots")
wrap(output, "render", "the tree's text")
from profkit.cli.main import entry
sys.argv = ["profkit", *sys.argv[1:]]
entry()
"""


def phases(python: str, pytest: bool) -> None:
    """One ``profkit run`` with the resident memory printed at each end-of-run phase."""
    with tempfile.TemporaryDirectory(prefix="profkit-wide-") as tmp:
        if pytest:
            found = subprocess.run(
                [python, "-c", "import os, pytest, sympy; print(os.path.dirname(sympy.__file__))"],
                capture_output=True,
                text=True,
                check=False,
            )
            if found.returncode != 0:
                print(f"{python}: sympy and pytest are needed for --pytest: skipped")
                return
            ini = os.path.join(tmp, "pytest.ini")
            Path(ini).write_text("[pytest]\n")
            test = os.path.join(found.stdout.strip(), "core", "tests", "test_arit.py")
            program = ["-m", "pytest", "-q", "-p", "no:cacheprovider", "-c", ini, test]
        else:
            program = [os.path.join(tmp, "wide.py")]
            Path(program[0]).write_text(PROGRAM)
        env = {k: v for k, v in os.environ.items() if not k.startswith("PROFKIT_")}
        env["PYTHONHASHSEED"] = "0"
        cmd = [python, "-c", PHASES, "run", "-o", os.path.join(tmp, "out.json"), *program]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    print(f"\n{python}: {'pytest test_arit' if pytest else 'the wide tree'}, profkit run by phase")
    for line in done.stderr.splitlines():
        if line.startswith("PHASE "):
            print("  " + line[6:])


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
    parser.add_argument("--phases", action="store_true", help="memory by end-of-run phase")
    parser.add_argument("--pytest", action="store_true", help="--phases: pytest on test_arit")
    args = parser.parse_args()
    for python in args.python or [sys.executable]:
        if args.phases:
            phases(python, args.pytest)
        else:
            bench(python)
    return 0


if __name__ == "__main__":
    sys.exit(main())
