"""Out-of-process sampling: profkit's sampler side by side with py-spy, same run.

Not a test. For each target interpreter and rate, a fixed CPU-bound program (the tight
generator of issue #12, ``--work`` rounds of ``for v in gen(N): t += v``) runs

* bare (``python target.py``),
* sampled by profkit (``profkit.sampler.sample_command``, in this process), and
* sampled by py-spy (``py-spy record --nonblocking``, which never pauses the target either),

interleaved, ``--repeat`` times; the medians are printed. Columns:

* ``wall×bare``: the target's own wall time (it measures itself and prints it) over the
  bare median — the cost the program pays (goal ≤ 1.01× at 1 kHz, ≤ 1.05× at 10 kHz);
* ``delivered``: samples taken / (rate × sampling time) (goal ≥ 95 %);
* ``µs/sample``: the sampler's own CPU time per sample (profkit: this process's CPU time
  over the ticks; py-spy: its child CPU time from ``wait4`` over its sample count);
* ``gen %``: the generator's self share, the number the issue is about.

On a shared 2-core machine the target and the sampler compete for the CPU, which is part
of what is measured: run it when the machine is quiet, and compare the columns within a
run, not across runs.

    python bench/sampler_bench.py                       # this interpreter, 1 kHz and 10 kHz
    python bench/sampler_bench.py --all --repeat 5      # pyenv 3.11.7, 3.12.1, 3.13.0
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from profkit.sampler import SamplerOptions, sample_command  # noqa: E402

TARGET = """
import sys, time
def gen(n):
    for i in range(n):
        yield i
def main(rounds, n):
    for _ in range(rounds):
        t = 0
        for v in gen(n):
            t += v
start = time.perf_counter()
main(int(sys.argv[1]), int(sys.argv[2]))
print(f"{time.perf_counter() - start:.6f}")
"""

PYENV = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"


def _gen_share(profile) -> float:
    total = sum(t.root.inclusive_ns for t in profile.threads)
    own = sum(
        n.exclusive_ns
        for t in profile.threads
        for _, n in t.root.walk()
        if n.frame >= 0 and profile.frames[n.frame].name.endswith("gen")
    )
    return own / total if total else 0.0


def run_bare(python: str, script: str, args: list[str]) -> float:
    out = subprocess.run([python, script, *args], capture_output=True, text=True, check=True)
    return float(out.stdout.split()[-1])


def run_profkit(python: str, script: str, args: list[str], rate: float) -> dict[str, float]:
    cpu0 = time.process_time()
    r, w = os.pipe()
    # The child's stdout (its own timing) goes through a pipe we read afterwards.
    saved = os.dup(1)
    os.dup2(w, 1)
    try:
        outcome = sample_command([python, script, *args], SamplerOptions(rate=rate))
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(w)
    wall = float(os.read(r, 4096).decode().split()[-1])
    os.close(r)
    cpu = time.process_time() - cpu0
    stats = outcome.stats
    assert stats is not None, outcome.fallback
    sampling_s = stats.elapsed_ns / 1e9
    return {
        "wall": wall,
        "delivered": stats.ticks / (rate * sampling_s),
        "us_per_sample": cpu / max(stats.ticks, 1) * 1e6,
        "gen": _gen_share(outcome.profiles[outcome.pid]),
    }


def run_py_spy(spy: str, python: str, script: str, args: list[str], rate: float, tmp: str):
    """The target started here, py-spy attached to it (so wait4 gives py-spy's CPU alone)."""
    out = os.path.join(tmp, "spy.txt")
    target = subprocess.Popen([python, script, *args], stdout=subprocess.PIPE, text=True)
    start = time.monotonic()
    spy_proc = subprocess.Popen(
        [
            spy,
            "record",
            "--pid",
            str(target.pid),
            "--rate",
            str(int(rate)),
            "--nonblocking",
            "--format",
            "raw",
            "--output",
            out,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    stdout, _ = target.communicate()
    elapsed = time.monotonic() - start
    _, _, usage = os.wait4(spy_proc.pid, 0)
    spy_proc.returncode = 0
    stderr = spy_proc.stderr.read() if spy_proc.stderr else ""
    wall = float(stdout.split()[-1])
    total = gen = 0
    if os.path.exists(out):
        with open(out) as f:
            for line in f:
                stack, _, n = line.rpartition(" ")
                if n.strip().isdigit():
                    total += int(n)
                    if stack.split(";")[-1].startswith("gen "):
                        gen += int(n)
    m = re.search(r"Samples: (\d+)", stderr)
    samples = int(m.group(1)) if m else total
    cpu = usage.ru_utime + usage.ru_stime
    return {
        "wall": wall,
        "delivered": samples / (rate * elapsed),
        "us_per_sample": cpu / max(samples, 1) * 1e6,
        "gen": gen / total if total else 0.0,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--python", action="append", help="target interpreter (repeatable)")
    ap.add_argument("--all", action="store_true", help="pyenv 3.11.7, 3.12.1 and 3.13.0")
    ap.add_argument("--rates", default="1000,10000")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--n", type=int, default=3_000_000)
    ns = ap.parse_args()
    pythons = ns.python or (
        [str(PYENV / v / "bin" / "python3") for v in ("3.11.7", "3.12.1", "3.13.0")]
        if ns.all
        else [sys.executable]
    )
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not os.path.exists(spy):
        spy = ""
        print("py-spy: not installed (pip install py-spy); its rows are left out")
    rates = [float(r) for r in ns.rates.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "target.py")
        Path(script).write_text(TARGET)
        args = [str(ns.rounds), str(ns.n)]
        print(
            f"{'python':8} {'rate':>6} {'sampler':8} {'wall s':>7} {'wall×bare':>9} "
            f"{'delivered':>9} {'µs/sample':>9} {'gen %':>6}"
        )
        for python in pythons:
            version = subprocess.run(
                [python, "-c", "import platform; print(platform.python_version())"],
                capture_output=True,
                text=True,
            ).stdout.strip()
            for rate in rates:
                rows: dict[str, list[dict[str, float]]] = {"bare": [], "profkit": [], "py-spy": []}
                for _ in range(ns.repeat):
                    rows["bare"].append({"wall": run_bare(python, script, args)})
                    rows["profkit"].append(run_profkit(python, script, args, rate))
                    if spy:
                        rows["py-spy"].append(run_py_spy(spy, python, script, args, rate, tmp))
                bare = statistics.median(r["wall"] for r in rows["bare"])
                for name in ("bare", "profkit", "py-spy"):
                    if not rows[name]:
                        continue
                    med = {k: statistics.median(r[k] for r in rows[name]) for k in rows[name][0]}
                    extra = (
                        f"{med['delivered']:9.1%} {med['us_per_sample']:9.1f} {med['gen']:6.1%}"
                        if name != "bare"
                        else ""
                    )
                    print(
                        f"{version:8} {rate:6.0f} {name:8} {med['wall']:7.3f} "
                        f"{med['wall'] / bare:9.3f} {extra}"
                    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
