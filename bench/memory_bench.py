"""``profkit run --mode memory`` against the bare program, tracemalloc and memray, in one run.

    python bench/memory_bench.py               # best of 3
    python bench/memory_bench.py --repeat 1    # quick look
    python bench/memory_bench.py --callgrind   # instructions instead (valgrind; deterministic)

The workload (written to ``bench/_work/memory/workload.py``) has two allocating functions:

* ``buffers()``: 400 bytearrays of 250,000 bytes (every 4th kept alive to the end: 25 MB);
* ``records()``: 300,000 small tuples, dicts and strings, kept in a list, then dropped (no
  temporaries and no list growth, so what it allocates is what it keeps).

Rows, each timed in the same run as the bare program (alternating, best of ``--repeat``):
the workload's own wall and CPU time around its two functions (so interpreter and profiler
start-up and saving are not counted; on a machine shared with other load the CPU time is the
steadier of the two) and the whole process's wall time, each ÷ bare, for

* ``profkit run --mode memory`` at the default sampling mean (512 KiB) and at 64 KiB;
* tracemalloc (``tracemalloc.start(1)`` inside the workload: stdlib, every allocation);
* ``memray run`` (PyPI; the row says "not available" when it is not installed).

Then accuracy, of every run (not only the best), against truths measured in this run:

* attribution: the share of allocated bytes profkit gives ``buffers`` vs ``records``, against
  the truth: each function run alone under tracemalloc with everything it made kept alive (so
  the bytes traced after it = the bytes it allocated: the workload makes no temporaries);
* peak: profkit's ``peak_bytes`` against tracemalloc's peak (``get_traced_memory()[1]``) in
  the tracemalloc row;
* the peak of a program holding 64 MiB in 1 MiB blocks (``peak.py``, then 50,000 small
  strings after the blocks are dropped): profkit at the default mean against memray's
  (``FileReader.metadata.peak_memory``), one pair of runs per repeat.

``--callgrind``: instructions instead of times, for a loaded machine where CPU time is noisy.
Each row runs under callgrind twice, with the two functions and without them
(``BENCH_SKIP_WORK=1``, all else the same); the difference is the functions' instructions
with whatever the profiler adds while they run, and its handling of their samples at the
end. ``--callgrind-div N`` runs 1/N of the workload (N=5: about a minute a row).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).parent
WORK = HERE / "_work" / "memory"

WORKLOAD = """\
import os, sys, time, tracemalloc

KEEP_ALL = os.environ.get("BENCH_KEEP_ALL") == "1"
SKIP_WORK = os.environ.get("BENCH_SKIP_WORK") == "1"  # --callgrind's baseline run
DIV = int(os.environ.get("BENCH_DIV", "1"))  # --callgrind-div
TRACE = os.environ.get("BENCH_TRACEMALLOC") == "1"
held = []

def buffers():
    for i in range(400 // DIV):
        b = bytearray(250_000)
        if KEEP_ALL or i % 4 == 0:
            held.append(b)

def records():
    out = [None] * (300_000 // DIV)  # no list growth (its reallocations are allocations too)
    for i in range(300_000 // DIV):
        out[i] = ((i, i + 1), {"k": i}, str(i))  # no temporaries: allocated = kept
    if KEEP_ALL:
        held.append(out)
    return len(out)

def main():
    result = {}
    if TRACE:
        tracemalloc.start(1)
    start = time.perf_counter()
    cpu = time.process_time()
    if KEEP_ALL:  # truth: each function's bytes, all of them kept alive
        tracemalloc.start(1)
        for f in (buffers, records):
            before = tracemalloc.get_traced_memory()[0]
            f()
            result[f.__name__] = tracemalloc.get_traced_memory()[0] - before
        tracemalloc.stop()
    elif not SKIP_WORK:
        buffers()
        records()
    result["work_s"] = time.perf_counter() - start
    result["work_cpu_s"] = time.process_time() - cpu
    if TRACE:
        result["tracemalloc_peak"] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    print(__import__("json").dumps(result))

main()
"""

PEAK_PROGRAM = """\
def hold():
    blocks = []
    for _ in range(64):
        blocks.append(bytearray(1 << 20))
    return blocks

blocks = hold()
small = [str(i) for i in range(50_000)]
del blocks
print("done")
"""


def run(cmd: list[str], env: dict[str, str]) -> tuple[float, dict[str, float]]:
    """(whole-process wall seconds, the workload's JSON line)."""
    start = time.perf_counter()
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if out.returncode != 0:
        raise RuntimeError(f"{cmd[:4]}... exited {out.returncode}: {out.stderr.strip()[-300:]}")
    line = [x for x in out.stdout.splitlines() if x.startswith("{")][-1]
    return wall, json.loads(line)


def memray_available() -> str | None:
    try:
        import memray  # noqa: F401
    except ImportError as exc:
        return f"memray not installed ({exc})"
    return None


def memray_peak(path: Path) -> float:
    import memray

    reader = memray.FileReader(str(path))
    try:
        return float(reader.metadata.peak_memory)
    finally:
        reader.close()


def self_bytes(path: Path) -> tuple[dict[str, float], float]:
    from profkit.calltree.file import load

    profile = load(str(path))
    out: dict[str, float] = {}
    for thread in profile.threads:
        for _, node in thread.root.walk():
            if node.frame >= 0:
                name = profile.frames[node.frame].name.split(".<locals>.")[0]
                short = name.rpartition(".")[2]
                out[short] = out.get(short, 0.0) + node.exclusive_ns
    return out, float(profile.metadata["peak_bytes"])


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="memory_bench_") as tmp:
        bench(Path(tmp))


def bench(tmp: Path) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--callgrind", action="store_true", help="instructions, not times")
    parser.add_argument("--callgrind-div", type=int, default=1, metavar="N")
    args = parser.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    script = WORK / "workload.py"
    script.write_text(WORKLOAD)
    peak_script = WORK / "peak.py"
    peak_script.write_text(PEAK_PROGRAM)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PROFKIT_", "BENCH_"))}
    py = sys.executable
    rows: dict[str, list[str] | None] = {
        "bare": [py, str(script)],
        "profkit 512KiB": [py, "-m", "profkit", "run", "--no-tree", "--mode", "memory",
                           "-o", str(tmp / "p512.json"), str(script)],
        "profkit 64KiB": [py, "-m", "profkit", "run", "--no-tree", "--mode", "memory",
                          "--alloc-sample", "64KiB", "-o", str(tmp / "p64.json"), str(script)],
        "tracemalloc": [py, str(script)],
        "memray": None if memray_available() else
        [py, "-m", "memray", "run", "-q", "-f", "-o", str(tmp / "m.bin"), str(script)],
    }  # fmt: skip
    if args.callgrind:
        callgrind(rows, env, args.callgrind_div)
        return
    best: dict[str, tuple[float, float, float]] = {}
    extra: dict[str, dict[str, float]] = {}
    #: per run: (profkit row, its self bytes by function, its peak) and tracemalloc's peak
    runs: list[tuple[list[tuple[str, dict[str, float], float]], float]] = []
    peaks: list[tuple[float, float | None]] = []  # (profkit, memray) on peak.py, per run
    for _ in range(args.repeat):
        for name, cmd in rows.items():
            if cmd is None:
                continue
            run_env = env | ({"BENCH_TRACEMALLOC": "1"} if name == "tracemalloc" else {})
            wall, result = run(cmd, run_env)
            now = (result["work_s"], wall, result["work_cpu_s"])
            old = best.get(name)
            best[name] = (
                (min(old[0], now[0]), min(old[1], now[1]), min(old[2], now[2])) if old else now
            )
            extra[name] = result
        runs.append(
            (
                [(n, *self_bytes(tmp / f)) for n, f in PROFKIT_FILES],
                extra["tracemalloc"]["tracemalloc_peak"],
            )
        )
        peaks.append(peak_pair(py, peak_script, tmp, env))
    bare_work, bare_wall, bare_cpu = best["bare"]
    print(f"python {sys.version.split()[0]}, best of {args.repeat}; ratios to bare in this run")
    print(
        f"{'row':<16} {'work s':>8} {'÷ bare':>7} {'work cpu s':>10} {'÷ bare':>7}"
        f" {'process s':>10} {'÷ bare':>7}"
    )
    for name, cmd in rows.items():
        if cmd is None:
            print(f"{name:<16} not available ({memray_available()})")
            continue
        work, wall, cpu = best[name]
        print(
            f"{name:<16} {work:8.3f} {work / bare_work:7.2f} {cpu:10.3f} {cpu / bare_cpu:7.2f}"
            f" {wall:10.3f} {wall / bare_wall:7.2f}"
        )

    _, truth = run([py, str(script)], env | {"BENCH_KEEP_ALL": "1"})
    total_truth = truth["buffers"] + truth["records"]
    print("\nattribution of allocated bytes (share of buffers+records), every run")
    print(f"  truth (tracemalloc, all kept): buffers {truth['buffers'] / 1e6:.1f} MB, "
          f"records {truth['records'] / 1e6:.1f} MB")  # fmt: skip
    for i, (profkit_rows, peak_tm) in enumerate(runs, 1):
        for name, by, peak in profkit_rows:
            got = by.get("buffers", 0.0) + by.get("records", 0.0)
            for fn in ("buffers", "records"):
                share, want = by.get(fn, 0.0) / (got or 1), truth[fn] / total_truth
                print(
                    f"  run {i} {name:<15} {fn:<8} {by.get(fn, 0.0) / 1e6:7.1f} MB"
                    f"  share {share:6.1%}  truth {want:6.1%}"
                    f"  error {(share - want) / want:+.1%} of the truth share;"
                    f"  bytes {(by.get(fn, 0.0) - truth[fn]) / truth[fn]:+.1%}"
                )
            print(
                f"  run {i} {name:<15} peak {peak / 1e6:.1f} MB vs tracemalloc's"
                f" {peak_tm / 1e6:.1f} MB: {(peak - peak_tm) / peak_tm:+.1%}"
            )
    print(
        "\npeak of 64 MiB held in 1 MiB blocks (peak.py), profkit at 512 KiB vs memray, every run"
    )
    for i, (ours, theirs) in enumerate(peaks, 1):
        against = (
            f"memray {theirs / 2**20:.2f} MiB: {(ours - theirs) / theirs:+.2%}"
            if theirs is not None
            else f"memray not available ({memray_available()})"
        )
        print(f"  run {i} profkit {ours / 2**20:.2f} MiB vs {against}")


def callgrind(rows: dict[str, list[str] | None], env: dict[str, str], div: int) -> None:
    """Each row's instructions for the two functions (a run with them minus one without),
    ÷ bare's, all in this run."""
    import re

    def instructions(cmd: list[str], skip: bool) -> int:
        run_env = env | {"BENCH_DIV": str(div)} | ({"BENCH_SKIP_WORK": "1"} if skip else {})
        vg = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *cmd]
        out = subprocess.run(vg, env=run_env, capture_output=True, text=True, check=False)
        found = re.search(r"Collected : (\d+)", out.stderr)
        if out.returncode != 0 or found is None:
            raise RuntimeError(f"{cmd[:4]}... under callgrind: {out.stderr.strip()[-300:]}")
        return int(found.group(1))

    print(f"python {sys.version.split()[0]}, callgrind, 1/{div} of the workload: instructions"
          " of the two functions (a run with them minus one without), ratios to bare")  # fmt: skip
    bare = 0
    for name, cmd in rows.items():
        if name == "tracemalloc":
            continue  # its tracing starts inside the workload: not a run-time row here
        if cmd is None:
            print(f"{name:<16} not available ({memray_available()})")
            continue
        work = instructions(cmd, False) - instructions(cmd, True)
        bare = bare or work
        print(f"{name:<16} {work / 1e6:10.1f} M  {work / bare:6.3f}")


#: the profkit rows whose profiles are read for accuracy, and their files
PROFKIT_FILES = (("profkit 512KiB", "p512.json"), ("profkit 64KiB", "p64.json"))


def peak_pair(py: str, script: Path, tmp: Path, env: dict[str, str]) -> tuple[float, float | None]:
    """peak.py's peak under profkit (default mean) and under memray (None without it)."""
    out = tmp / "peak.json"
    cmd = [py, "-m", "profkit", "run", "--no-tree", "--mode", "memory", "-o", str(out), str(script)]
    subprocess.run(cmd, env=env, capture_output=True, check=True)
    ours = float(json.loads(out.read_text())["metadata"]["peak_bytes"])
    if memray_available():
        return ours, None
    binary = tmp / "peak.bin"
    cmd = [py, "-m", "memray", "run", "-q", "-f", "-o", str(binary), str(script)]
    subprocess.run(cmd, env=env, capture_output=True, check=True)
    return ours, memray_peak(binary)


if __name__ == "__main__":
    main()
