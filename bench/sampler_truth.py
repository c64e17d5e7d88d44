"""Out-of-process sampling's absolute times against the program's own clocks, with py-spy
beside it in the same run (findings N2: 1.17 s of a 3 s attach on a busy machine).

Not a test. A program whose three threads time their own functions with
``perf_counter`` (a main loop alternating a 30 ms spin and a 20 ms sleep, a spinner
alternating 10 ms and 5 ms spins, a sleeper in 50 ms naps) runs for ``--seconds``;
profkit's sampler (``SamplerSession``, wall mode) and ``py-spy record --idle`` read it at
the same time. ``--load N`` starts N busy loops beside it for the run (the machine
the finding was made on had a load average of 4-7 on 2 cores). Printed: each function's
inclusive time as the program measured it, as profkit weighs it, and as py-spy's sample
count times its interval (py-spy has no weights: a late sample stands for one interval),
with the ratios to the program's own number; and the session's late/unsampled time.

    python bench/sampler_truth.py                      # 1 kHz, 3 s, no extra load
    python bench/sampler_truth.py --load 3 --rate 200  # the N7 interval, 3 busy loops
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from profkit.sampler import SamplerOptions, SamplerSession  # noqa: E402

PROGRAM = r"""
import json, sys, threading, time
own = {}
def note(name, t0):
    own[name] = own.get(name, 0.0) + time.perf_counter() - t0
def spin(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass
def phase_a():
    t0 = time.perf_counter(); spin(0.03); note("phase_a", t0)
def phase_b():
    t0 = time.perf_counter(); time.sleep(0.02); note("phase_b", t0)
def spin_x():
    t0 = time.perf_counter(); spin(0.01); note("spin_x", t0)
def spin_y():
    t0 = time.perf_counter(); spin(0.005); note("spin_y", t0)
def nap():
    t0 = time.perf_counter(); time.sleep(0.05); note("nap", t0)
stop = time.perf_counter() + float(sys.argv[1])
def spinner():
    while time.perf_counter() < stop:
        spin_x(); spin_y()
def sleeper():
    while time.perf_counter() < stop:
        nap()
ts = [threading.Thread(target=spinner), threading.Thread(target=sleeper)]
for t in ts: t.start()
while time.perf_counter() < stop:
    phase_a(); phase_b()
for t in ts: t.join()
print("TRUTH " + json.dumps(own), file=sys.stderr)
"""
FUNCS = ("phase_a", "phase_b", "spin_x", "spin_y", "nap")


def _profkit_times(profile) -> dict[str, float]:
    """Inclusive seconds per function (no recursion in the program)."""
    out: dict[str, float] = {}
    for thread in profile.threads:
        for _, node in thread.root.walk():
            if node.frame >= 0:
                name = profile.frames[node.frame].name.rsplit(".", 1)[-1]
                out[name] = out.get(name, 0.0) + node.inclusive_ns / 1e9
    return out


def _py_spy_times(path: str, rate: float) -> dict[str, float]:
    out: dict[str, float] = {}
    with open(path) as f:
        for line in f:
            stack, _, count = line.rstrip().rpartition(" ")
            for name in set(re.findall(r"(\w+) \(", stack)):
                out[name] = out.get(name, 0.0) + int(count) / rate
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rate", type=float, default=1000.0)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--load", type=int, default=0, help="busy loops to run beside it")
    args = ap.parse_args()
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    busy = [subprocess.Popen([sys.executable, "-c", "while 1: pass"]) for _ in range(args.load)]
    try:
        with tempfile.TemporaryDirectory() as tmp:
            prog = Path(tmp, "truth.py")
            prog.write_text(PROGRAM)
            target = subprocess.Popen(
                [sys.executable, str(prog), str(args.seconds)], stderr=subprocess.PIPE, text=True
            )
            session = SamplerSession(
                target.pid, SamplerOptions(rate=args.rate, follow_children=False), wait_s=2.0
            )
            raw = os.path.join(tmp, "spy.txt")
            peer = None
            if os.path.exists(spy):
                spy_args = ["-f", "raw", "--idle", "--nonblocking", "-o", raw]
                peer = subprocess.Popen(
                    [spy, "record", "-p", str(target.pid), "-r", str(int(args.rate)), *spy_args],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            stats = session.run()
            session.close()
            err = target.communicate()[1]
            if peer is not None:
                peer.wait()
            truth = json.loads(err.split("TRUTH ", 1)[1])
            ours = _profkit_times(session.profiles()[target.pid])
            theirs = _py_spy_times(raw, args.rate) if os.path.exists(raw) else {}
    finally:
        for p in busy:
            p.kill()
            p.wait()
    print(
        f"rate {args.rate:g} Hz, {args.seconds:g} s, load +{args.load} "
        f"(loadavg {os.getloadavg()[0]:.1f}): {stats.ticks} reads of {stats.asked} asked, "
        f"late time {stats.late_ns / 1e9:.2f} s, unsampled {stats.unsampled_ns / 1e9:.2f} s"
    )
    print(f"{'function':10} {'own':>7} {'profkit':>8} {'ratio':>6} {'py-spy':>8} {'ratio':>6}")
    for f in FUNCS:
        t, p, s = truth.get(f, 0.0), ours.get(f, 0.0), theirs.get(f, 0.0)
        print(
            f"{f:10} {t:7.3f} {p:8.3f} {p / t if t else 0:6.2f} {s:8.3f} {s / t if t else 0:6.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
