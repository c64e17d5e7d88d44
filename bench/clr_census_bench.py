"""The .NET heap census's cost on a heap of about a million objects (issue 24 item 2).

    python bench/clr_census_bench.py              # best of 3
    python bench/clr_census_bench.py --repeat 1 --items 333333

``bench/clr/CensusMillion.cs`` keeps ``items`` objects with a string and an int array
each (3 x 333,333 = 1,000,000 objects) in a static field, then times its own full
blocking ``GC.Collect`` (the peer). Rows, each the best of ``--repeat`` runs made in
this run, alternating:

* the census's forced GC and heap walk (writing every object and reference to the
  census file), and the naming after it, as ``profkit heap run`` reports them;
* the program's own full GC of the same heap, under the census and bare (the census's
  ``COR_PRF_MONITOR_GC`` makes every GC walk the heap for the profiler too);
* the whole run's wall time, under ``profkit heap run`` and bare.

Needs mono's ``mcs`` and a .NET host (``dotnetcore2``, ``PROFKIT_DOTNET`` or ``dotnet``).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from dotnet_sample_common import build_cs

from profkit.clr.host import find_host

HERE = Path(__file__).parent
WORK = HERE / "_work" / "clr_census"


def build() -> Path:
    return build_cs(HERE / "clr" / "CensusMillion.cs", WORK)


def own_gc_ms(stdout: str) -> float:
    match = re.search(r"own_gc_ms ([0-9.]+)", stdout)
    return float(match.group(1)) if match else float("nan")


def bare(dotnet: str, dll: Path, items: int) -> tuple[float, float]:
    start = time.perf_counter()
    proc = subprocess.run(
        [dotnet, str(dll), str(items)], capture_output=True, text=True, check=True
    )
    return time.perf_counter() - start, own_gc_ms(proc.stdout)


def census(dll: Path, items: int) -> tuple[float, float, float, float, str]:
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "profkit", "heap", "run", str(dll), str(items)],
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"clr_census_bench: heap run failed:\n{proc.stderr}")
    match = re.search(r"census took ([0-9.]+) ms, naming ([0-9.]+) ms", proc.stderr)
    if match is None:
        sys.exit(f"clr_census_bench: no census line in:\n{proc.stderr}")
    head = proc.stderr.splitlines()[0]
    return wall, own_gc_ms(proc.stdout), float(match.group(1)), float(match.group(2)), head


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--items", type=int, default=333_333)
    args = parser.parse_args()
    dotnet = find_host(None).path
    dll = build()
    bare_runs, census_runs = [], []
    for _ in range(args.repeat):
        bare_runs.append(bare(dotnet, dll, args.items))
        census_runs.append(census(dll, args.items))
    b_wall, b_gc = min(r[0] for r in bare_runs), min(r[1] for r in bare_runs)
    c_wall, c_gc = min(r[0] for r in census_runs), min(r[1] for r in census_runs)
    walk, names = min(r[2] for r in census_runs), min(r[3] for r in census_runs)
    print(census_runs[-1][4])
    print(f"census: forced GC + walk {walk:.1f} ms, naming {names:.1f} ms (best of {args.repeat})")
    print(
        f"the program's own full GC: {c_gc:.1f} ms under the census, {b_gc:.1f} ms bare ({c_gc / b_gc:.1f}x)"
    )
    print(f"whole run: {c_wall:.2f} s under heap run, {b_wall:.2f} s bare ({c_wall / b_wall:.2f}x)")
    print(f"census walk / bare full GC: {walk / b_gc:.1f}x")


if __name__ == "__main__":
    main()
