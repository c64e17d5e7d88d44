"""profkit's fixed start-up and exit cost against cProfile's and a bare interpreter's.

Every row runs an empty script as a whole process — interpreter start, profiler start,
the (empty) program, detach, saving the profile, exit — best (minimum) of ``--repeat``
runs for wall time and for CPU time (user + system of the child, from ``wait4``), and
the largest peak RSS seen. All rows of one interpreter are measured in the same session,
interleaved round by round, so drifting load on a shared machine hits every row alike.

    python bench/startup_bench.py                         # this interpreter, 15 rounds
    python bench/startup_bench.py --python .venvs/py3.11/bin/python \\
        --python .venvs/py3.12/bin/python --python .venvs/py3.13/bin/python
    python bench/startup_bench.py --modules                # what profkit imported by then

Rows: ``bare`` (``python empty.py``), ``cProfile -o`` (``python -m cProfile -o f.pstats``,
its own save included, as profkit's is), ``cProfile (prints stats)`` (``python -m cProfile
empty.py``: the peer of the default ``profkit run``, which prints a tree at the end; the
``--instructions`` table gives the tree rows against it too), then every ``profkit run``
path: ``python -m profkit`` and the ``profkit`` console script, trace mode with and without
the end-of-run tree, sample mode, and environment activation (``PROFKIT_ENABLE_PROFILING=1
python empty.py``, as every child of a profiled program starts). Target (issues #11, #26):
each profkit row ≤ cProfile's (``-o`` for the rows that save only, the printing peer for
the tree rows).

Last, the ``.pth`` start-up line that the wheel installs runs in *every* Python process of
the environment; with profiling off its cost is measured in-process (the line executed
100,000 times) and shown against ``python -c pass``'s whole start.

``--instructions`` counts each row's instructions instead (``valgrind --tool=callgrind``,
one run each, ~50x slower; sample mode left out: its sampler cannot read a child run under
valgrind): deterministic, so it compares the rows on a machine too loaded
for timings to agree from one run to the next.

``--no-bytecode`` runs every row (cProfile's too) with ``PYTHONDONTWRITEBYTECODE=1``, as
this machine's shell, a read-only install or a container started afresh does: nothing is
written, so whatever byte code profkit's package does not already hold is compiled on every
run. An installed profkit holds it (pip compiles a wheel at install; hatch_build.py compiles
an editable checkout's sources at install); ``--drop-pycache`` first deletes profkit's
``__pycache__`` directories, the worst case (every profkit module compiled each run, as in a
checkout whose sources changed since it was installed).

The profkit rows run with the calibration's costs cached (a cache of the bench's own,
filled by three runs first: a user's runs after their first three); the ``calibrating``
row is a run that measures them (``PROFKIT_CALIBRATION_CACHE=0``), as those first runs do.

``--modules`` prints, per path, the modules profkit itself had imported when the program's
first line ran (``sys.modules`` minus what a bare interpreter has), the import budget that
``tests/cli/test_startup_imports.py`` guards.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

EMPTY = "pass\n"
#: What the program prints when ``--modules`` asks: the modules loaded before its first line.
MODULES_PROBE = "import sys\nprint(' '.join(sorted(sys.modules)))\n"


#: The peer of the default ``profkit run`` (which prints a tree at the end): cProfile
#: printing its stats, ``python -m cProfile empty.py``.
PRINTING_PEER = "cProfile (prints stats)"

#: Runs that fill the calibration's cache (profkit/profilers/elt/calcache.py) before a row counts.
CACHE_RUNS = 3


def _rows(python: str, script: str, out: str) -> dict[str, tuple[list[str], dict[str, str]]]:
    """name -> (command, extra environment).

    The profkit rows keep the calibration's costs in a cache of the bench's own (warmed
    by :data:`CACHE_RUNS` runs first), as every run after a user's first three does; the
    ``calibrating`` row measures them, as those first runs do (``PROFKIT_CALIBRATION_CACHE=0``).
    """
    console = os.path.join(os.path.dirname(python), "profkit")
    run = ["run", "--no-subprocesses"]
    sample = [python, "-m", "profkit", *run, "--no-tree", "--mode", "sample"]
    cache = {"PROFKIT_CALIBRATION_CACHE": out + ".calibration"}
    rows: dict[str, tuple[list[str], dict[str, str]]] = {
        "bare": ([python, script], {}),
        "cProfile -o": ([python, "-m", "cProfile", "-o", out + ".pstats", script], {}),
        PRINTING_PEER: ([python, "-m", "cProfile", script], {}),
        "profkit -m, --no-tree": (
            [python, "-m", "profkit", *run, "--no-tree", "-o", out + ".1.json", script],
            cache,
        ),
        "  calibrating (no cache)": (
            [python, "-m", "profkit", *run, "--no-tree", "-o", out + ".6.json", script],
            {"PROFKIT_CALIBRATION_CACHE": "0"},
        ),
        "profkit -m, tree": (
            [python, "-m", "profkit", *run, "-o", out + ".2.json", script],
            cache,
        ),
        "profkit script, --no-tree": (
            [console, *run, "--no-tree", "-o", out + ".3.json", script],
            cache,
        ),
        "profkit -m, sample": (
            [*sample, "-o", out + ".4.json", script],
            {},
        ),
        "env activation": (
            [python, script],
            {
                "PROFKIT_ENABLE_PROFILING": "1",
                "PROFKIT_PROFILER": "profkit.profilers.elt:EltProfiler",
                "PROFKIT_TREE": "0",
                "PROFKIT_OUTPUT": out + ".5.json",
            },
        ),
    }
    if not os.path.exists(console):
        del rows["profkit script, --no-tree"]
    return rows


#: ``--no-bytecode``: every row runs with PYTHONDONTWRITEBYTECODE=1 (set by main()).
NO_BYTECODE = False


def _clean_env(extra: dict[str, str]) -> dict[str, str]:
    # Bytecode caches allowed by default, as an installed package has them (this sandbox
    # sets PYTHONDONTWRITEBYTECODE); --no-bytecode measures the rows without writing any.
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("PROFKIT_") and k != "PYTHONDONTWRITEBYTECODE"
    }
    if NO_BYTECODE:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update(extra)
    return env


def _pycache(python: str, drop: bool) -> str:
    """How many of profkit's modules have byte code for ``python`` (after deleting every
    ``__pycache__`` of the package first when ``drop``)."""
    code = (
        "import importlib.util, os, sys, profkit\n"
        "root = os.path.dirname(profkit.__file__)\n"
        "if sys.argv[1] == '1':\n"
        "    import shutil\n"
        "    for d, subs, _ in os.walk(root):\n"
        "        if '__pycache__' in subs: shutil.rmtree(os.path.join(d, '__pycache__'))\n"
        "src = [os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs if f.endswith('.py')]\n"
        "have = sum(os.path.exists(importlib.util.cache_from_source(f)) for f in src)\n"
        "print(f'{have} of {len(src)} profkit modules have byte code for this interpreter')\n"
    )
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    return subprocess.run(
        [python, "-c", code, "1" if drop else "0"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def _once(cmd: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """(wall s, CPU s, peak RSS KiB) of one run."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss


def _pth_cost(python: str) -> str:
    """The installed ``.pth`` line's cost with profiling off, in-process."""
    code = r"""
import os, sys, sysconfig, timeit
path = os.path.join(sysconfig.get_paths()["purelib"], "profkit_startup.pth")
try:
    line = open(path).read().strip()
except OSError:
    print("no profkit_startup.pth in " + os.path.dirname(path)); sys.exit()
os.environ.pop("PROFKIT_ENABLE_PROFILING", None)
code = compile(line, path, "exec")
n = 100_000
best = min(timeit.repeat(lambda: exec(code, {}), number=n, repeat=5)) / n
base = min(timeit.repeat(lambda: exec(compile("pass", "x", "exec"), {}), number=n, repeat=5)) / n
print(f"{best * 1e9:.0f} ns a process (exec of 'pass' alone: {base * 1e9:.0f} ns)")
"""
    env = _clean_env({})
    return subprocess.run(
        [python, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout.strip()


def bench(python: str, rounds: int) -> None:
    version = subprocess.run(
        [python, "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    print(f"\n=== Python {version} ({python}): empty script, best of {rounds} ===")
    with tempfile.TemporaryDirectory(prefix="startup-bench-") as tmp:
        script = os.path.join(tmp, "empty.py")
        Path(script).write_text(EMPTY)
        rows = _rows(python, script, os.path.join(tmp, "out"))
        envs = {name: _clean_env(extra) for name, (_, extra) in rows.items()}
        for name, (cmd, _) in rows.items():  # warm-up: byte code, file and calibration caches
            for _ in range(CACHE_RUNS):
                _once(cmd, envs[name])
        results: dict[str, list[tuple[float, float, int]]] = {name: [] for name in rows}
        for _ in range(rounds):
            for name, (cmd, _) in rows.items():
                results[name].append(_once(cmd, envs[name]))
        pass_wall = min(_once([python, "-c", "pass"], _clean_env({}))[0] for _ in range(rounds))
    best = {
        name: (min(r[0] for r in runs), min(r[1] for r in runs), max(r[2] for r in runs))
        for name, runs in results.items()
    }
    bare_w, bare_c, _ = best["bare"]
    cp_w, cp_c, cp_rss = best["cProfile -o"]
    print(
        f"  {'':<27}{'wall':>8}{'CPU':>8}{'RSS':>8}"
        f"{'added wall':>12}{'added CPU':>11}{'× cProfile (added wall, CPU, RSS)':>36}"
    )
    for name, (w, c, rss) in best.items():
        added_w, added_c = w - bare_w, c - bare_c
        ratio = ""
        if name != "bare":
            rw = added_w / (cp_w - bare_w) if cp_w > bare_w else float("nan")
            rc = added_c / (cp_c - bare_c) if cp_c > bare_c else float("nan")
            ratio = f"{rw:>18.2f}{rc:>8.2f}{rss / cp_rss:>8.2f}"
        print(
            f"  {name:<27}{w * 1000:>6.1f}ms{c * 1000:>6.1f}ms{rss / 1024:>6.1f}MB"
            f"{added_w * 1000:>10.1f}ms{added_c * 1000:>9.1f}ms{ratio}"
        )
    print(
        f"  .pth line, profiling off: {_pth_cost(python)}; python -c pass: {pass_wall * 1e3:.1f} ms"
    )


def _instructions(cmd: list[str], env: dict[str, str]) -> int:
    """Instructions the whole process executed (user space), counted by callgrind."""
    proc = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *cmd],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        check=True,
    )
    for line in proc.stderr.splitlines():
        if "Collected :" in line:
            return int(line.rsplit(":", 1)[1])
    raise SystemExit(f"no instruction count from valgrind for {' '.join(cmd)}")


def instructions(python: str) -> None:
    """Each row's instruction count, and what it adds to bare's, against cProfile's."""
    print(f"\n=== Python {python}: empty script, instructions (valgrind callgrind) ===")
    with tempfile.TemporaryDirectory(prefix="startup-bench-") as tmp:
        script = os.path.join(tmp, "empty.py")
        Path(script).write_text(EMPTY)
        rows = _rows(python, script, os.path.join(tmp, "out"))
        # Not sample mode: under valgrind the child ends before the sampler reads it.
        del rows["profkit -m, sample"]
        counts = {}
        for name, (cmd, extra) in rows.items():
            env = _clean_env(extra)
            for _ in range(CACHE_RUNS):  # byte code and calibration caches written
                _once(cmd, env)
            counts[name] = _instructions(cmd, env)
    bare, cprofile = counts["bare"], counts["cProfile -o"]
    printing = counts[PRINTING_PEER]
    print(
        f"  {'':<27}{'instructions':>14}{'added':>10}"
        f"{'× cProfile -o (added)':>23}{'× printing peer':>17}"
    )
    for name, n in counts.items():
        ratio = ""
        if name != "bare":
            ratio = f"{(n - bare) / (cprofile - bare):>23.2f}"
            if name == PRINTING_PEER or name.endswith(", tree"):  # both print at the end
                ratio += f"{(n - bare) / (printing - bare):>17.2f}"
        print(f"  {name:<27}{n / 1e6:>12.1f} M{(n - bare) / 1e6:>8.1f} M{ratio}")


def modules(python: str) -> None:
    """Print what each profkit path imported before the program's first line."""
    with tempfile.TemporaryDirectory(prefix="startup-bench-") as tmp:
        script = os.path.join(tmp, "probe.py")
        Path(script).write_text(MODULES_PROBE)
        rows = _rows(python, script, os.path.join(tmp, "out"))
        seen: dict[str, set[str]] = {}
        for name, (cmd, extra) in rows.items():
            if name.startswith("cProfile"):
                continue
            out = subprocess.run(
                cmd, env=_clean_env(extra), capture_output=True, text=True, check=True
            ).stdout
            seen[name] = set(out.split())
    bare = seen.pop("bare")
    print(f"\n=== Python {python}: modules loaded before the program's first line ===")
    print(f"  bare: {len(bare)}")
    for name, mods in seen.items():
        added = sorted(mods - bare)
        own = [m for m in added if m.startswith("profkit")]
        print(f"  {name}: +{len(added)} ({len(own)} of profkit's)")
        print("    " + " ".join(m for m in added if not m.startswith("profkit")))
        print("    " + " ".join(own))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--python", action="append", help="interpreter(s) to measure (default: this one)"
    )
    parser.add_argument("--repeat", type=int, default=15, help="rounds (best of; default 15)")
    parser.add_argument(
        "--modules", action="store_true", help="list what each path imported, no timing"
    )
    parser.add_argument(
        "--no-bytecode",
        action="store_true",
        help="every row with PYTHONDONTWRITEBYTECODE=1 (profkit's installed byte code only)",
    )
    parser.add_argument(
        "--drop-pycache",
        action="store_true",
        help="with --no-bytecode: delete profkit's __pycache__ first (all compiled each run)",
    )
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="count instructions under valgrind (deterministic) instead of timing",
    )
    args = parser.parse_args()
    global NO_BYTECODE
    NO_BYTECODE = args.no_bytecode
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for python in args.python or [sys.executable]:
        if args.no_bytecode:
            print(f"\nPYTHONDONTWRITEBYTECODE=1: {_pycache(python, args.drop_pycache)}")
        if args.modules:
            modules(python)
        elif args.instructions:
            if shutil.which("valgrind") is None:
                print("--instructions needs valgrind (apt-get install valgrind)")
                return 1
            instructions(python)
        else:
            bench(python, args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
