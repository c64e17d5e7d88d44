"""ELT trace mode on 3.11 without C-call nodes: the evalframe backend against its peers.

Usage::

    python bench/elt_evalframe.py             # sympy under callgrind (minutes)
    python bench/elt_evalframe.py --counts    # call counts per function vs cProfile

On 3.11 a profile function (cProfile's, or profkit's setprofile backend) makes the
interpreter trace every bytecode; the evalframe backend (a PEP 523 frame-evaluation
function, ``collect/csrc/evalframe.h``) does not, but it cannot see C calls, so it serves
``--no-c-calls`` only, where ``auto`` takes it on 3.11. The fair peer is then cProfile with
``builtins=False`` (no C-call entries either); plain cProfile is printed too. The rows:
bare, both cProfiles, ``profkit run`` as it comes (setprofile on 3.11: C-call nodes) and
``profkit run --no-c-calls`` (evalframe). Each profkit row names the backend it must run
and the bench checks it in the saved profile's ``metadata["backend"]`` (after the callgrind
runs too), so a row can no longer run another backend than it says (it once did: ``profkit
run`` ignored ``PROFKIT_BACKEND``). Instructions (callgrind, whole process) decide: each
tool's total and its instructions added over bare ÷ each cProfile's, from the same run.
``--counts`` checks the profile: calls per function against
``cProfile.Profile(builtins=False)`` on the same program (profkit's own start-up frames
aside).
"""

from __future__ import annotations

import argparse
import json
import os
import pstats
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from elt_bench import REAL_PROGRAMS, _callgrind_total

#: cProfile as ``-m cProfile -o`` runs it, with its ``builtins`` flag given
CPROFILE = """\
import cProfile, runpy, sys
script, out, builtins = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
sys.argv = [script]
prof = cProfile.Profile(builtins=builtins)
prof.enable()
try:
    runpy.run_path(script, run_name="__main__")
finally:
    prof.disable()
    prof.dump_stats(out)
"""


_QUIET: dict[str, Any] = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROFKIT_")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONHASHSEED"] = "0"  # sympy's work follows set and dict order
    return env | extra


#: profkit rows: tool -> (extra ``profkit run`` options, output stem, the backend it must
#: run: checked in the saved profile's metadata)
PROFKIT_ROWS: dict[str, tuple[list[str], str, str]] = {
    "profkit (setprofile)": ([], "sp", "setprofile"),
    "profkit --no-c-calls": (["--no-c-calls"], "ef", "evalframe"),
}


def commands(python: str, script: str, tmp: str) -> dict[str, tuple[list[str], dict[str, str]]]:
    """tool -> (command, environment)."""
    profkit = [python, "-m", "profkit", "run", "--no-tree", "--no-subprocesses"]
    cmds = {
        "bare": ([python, script], _env()),
        "cProfile": ([python, "-c", CPROFILE, script, f"{tmp}/c.pstats", "1"], _env()),
        "cProfile nobuiltins": (
            [python, "-c", CPROFILE, script, f"{tmp}/cnb.pstats", "0"],
            _env(),
        ),
    }
    # the calibration's costs in a cache of the bench's own (filled by the warm-up runs)
    cache = _env(PROFKIT_CALIBRATION_CACHE=f"{tmp}/calibration")
    for tool, (options, stem, _backend) in PROFKIT_ROWS.items():
        cmds[tool] = ([*profkit, *options, "-o", f"{tmp}/{stem}.json", script], cache)
    return cmds


def check_backends(tmp: str) -> None:
    """Each profkit row ran the backend it names (its saved profile's metadata)."""
    from profkit.calltree import file as profile_file

    for tool, (_options, stem, backend) in PROFKIT_ROWS.items():
        ran = profile_file.load(Path(f"{tmp}/{stem}.json")).metadata.get("backend")
        if ran != backend:
            raise SystemExit(f"{tool}: ran the {ran} backend, not {backend}")
        print(f"  {tool}: backend {ran} (saved profile's metadata)", flush=True)


def instructions(python: str) -> None:
    """Every tool under callgrind: totals, × bare, added ÷ each cProfile's added."""
    if shutil.which("valgrind") is None:
        raise SystemExit("needs valgrind (callgrind)")
    counts: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="profkit-ef-") as tmp:
        script = os.path.join(tmp, "sympy_work.py")
        Path(script).write_text(REAL_PROGRAMS["sympy"])
        cmds = commands(python, script, tmp)
        for tool, (cmd, env) in cmds.items():  # byte code written, calibration cached
            for _ in range(4 if tool in PROFKIT_ROWS else 1):  # (calcache.MIN_RUNS measure)
                subprocess.run(cmd, env=env, capture_output=True, check=True)
        check_backends(tmp)
        # all at once: instruction counts do not depend on the load, and each run takes
        # minutes under valgrind
        running = {}
        for i, (tool, (cmd, env)) in enumerate(cmds.items()):
            out = os.path.join(tmp, f"cg.{i}")
            grind = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"]
            running[tool] = (out, subprocess.Popen([*grind, *cmd], env=env, **_QUIET))
        for tool, (out, proc) in running.items():
            if proc.wait() != 0:
                raise SystemExit(f"{tool} failed under callgrind")
            counts[tool] = _callgrind_total(Path(out))
            print(f"  {tool:<22}{counts[tool] / 1e9:>8.3f}G", flush=True)
        check_backends(tmp)  # the callgrind runs' own profiles
        print("\ncalls per function in those same runs:")
        compare_counts(tmp, script, [(t, stem) for t, (_o, stem, _b) in PROFKIT_ROWS.items()], 3)
    bare = counts["bare"]
    peers = {p: counts[p] - bare for p in ("cProfile", "cProfile nobuiltins")}
    print(f"\n{sys.version.split()[0]} sympy: instructions (callgrind), whole process")
    print(f"  {'tool':<22}{'total':>9}{'× bare':>8}{'added':>9}{'/cP':>7}{'/cP nob':>9}")
    for tool, total in counts.items():
        added = total - bare
        ratios = [added / peer if peer > 0 else 0.0 for peer in peers.values()]
        print(
            f"  {tool:<22}{total / 1e9:>8.3f}G{total / bare:>7.3f}×{added / 1e9:>8.3f}G"
            f"{ratios[0]:>6.2f}×{ratios[1]:>8.2f}×"
        )


def _profkit_calls(path: str) -> dict[tuple[str, int, str], int]:
    """(file, first line, name) -> calls, over every thread's tree."""
    from profkit.calltree import file as profile_file

    profile = profile_file.load(Path(path))
    out: dict[tuple[str, int, str], int] = {}
    for thread in profile.threads:
        for _, node in thread.root.walk():
            if node.frame is not None:
                frame = profile.frames[node.frame]
                key = (frame.file or "", frame.line or 0, frame.name.rpartition(".")[2])
                out[key] = out.get(key, 0) + node.calls
    return out


def _cprofile_calls(path: str) -> dict[tuple[str, int, str], int]:
    """(file, first line, name) -> calls of a cProfile dump (C functions left out)."""
    stats = pstats.Stats(path).stats  # type: ignore[attr-defined]
    out: dict[tuple[str, int, str], int] = {}
    for (file, line, name), (_cc, calls, *_rest) in stats.items():
        if file != "~":
            out[(file, line, name)] = out.get((file, line, name), 0) + calls
    return out


def compare_counts(tmp: str, script: str, rows: list[tuple[str, str]], top: int = 8) -> None:
    """Calls per sympy/script function of each (tool, output stem) in ``tmp`` (a ``.json``
    profile, or a ``.pstats`` dump) against ``cnb.pstats``, cProfile(builtins=False)'s."""
    theirs = _cprofile_calls(f"{tmp}/cnb.pstats")
    for tool, out in rows:
        pstats_file = f"{tmp}/{out}.pstats"
        if os.path.exists(pstats_file):
            ours = _cprofile_calls(pstats_file)
        else:
            ours = _profkit_calls(f"{tmp}/{out}.json")
        keys = {k for k in set(ours) | set(theirs) if "sympy" in k[0] or k[0] == script}
        differ = {k: (ours.get(k, 0), theirs.get(k, 0)) for k in keys}
        differ = {k: v for k, v in differ.items() if v[0] != v[1]}
        total = sum(theirs.get(k, 0) for k in keys)
        mine = sum(ours.get(k, 0) for k in keys)
        print(
            f"{tool}: {len(keys)} sympy/script functions, {mine} calls vs cProfile "
            f"nobuiltins' {total} ({mine / total:.4f}×); {len(differ)} functions differ"
        )
        for k, (a, b) in sorted(differ.items(), key=lambda kv: -abs(kv[1][0] - kv[1][1]))[:top]:
            print(f"    {json.dumps(k)}: {a}, cProfile {b}")


def counts_check(python: str) -> None:
    """Calls per function: each profkit row vs cProfile(builtins=False), beside the noise
    floor: sympy's work follows object addresses (caches keyed by identity hashes), which
    any tool in the process moves; so cProfile(builtins=False) runs twice."""
    with tempfile.TemporaryDirectory(prefix="profkit-efc-") as tmp:
        script = os.path.join(tmp, "sympy_work.py")
        Path(script).write_text(REAL_PROGRAMS["sympy"])
        cmds = commands(python, script, tmp)
        for tool in ("cProfile nobuiltins", *PROFKIT_ROWS):
            cmd, env = cmds[tool]
            subprocess.run(cmd, env=env, capture_output=True, check=True)
        check_backends(tmp)
        again, env = cmds["cProfile nobuiltins"]
        subprocess.run([*again[:-2], f"{tmp}/cnb2.pstats", "0"], env=env, check=True)
        rows = [("cProfile nobuiltins again", "cnb2")]
        rows += [(tool, stem) for tool, (_o, stem, _b) in PROFKIT_ROWS.items()]
        compare_counts(tmp, script, rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--counts", action="store_true", help="compare calls per function")
    args = parser.parse_args()
    if args.counts:
        counts_check(args.python)
    else:
        instructions(args.python)


if __name__ == "__main__":
    main()
