"""Leaf (self) shares of one sympy run as profkit's sampler, py-spy and perf see them, all
three reading the same process at the same time.

Not a test. The finding (session 14): sympy's ``monomial_mul`` (made by ``exec`` in
``MonomialOps``, called from ``PolyElement.__mul__``) had about twice py-spy's share
in ``profkit run --mode sample``, by weight, not by sample count. The third oracle is
``perf record --call-graph dwarf`` on a target run with ``python -X perf`` (3.12+): the
innermost ``py::`` frame of each CPU sample is its leaf Python function. perf samples CPU
time, py-spy counts samples, profkit weighs each sample (``--mode``: wall or cpu).

Printed, per function (the top ones and ``--focus``): profkit's share by weight and by
sample count, py-spy's, perf's; then the session's stats (late time, torn reads, the
sampler's own time paid out over later reads: ``ProcessRecorder.add_wall``).

    python bench/sampler_shares.py                     # this interpreter, 1 kHz, wall
    python bench/sampler_shares.py --mode cpu --load 3 # three busy loops beside it
    python bench/sampler_shares.py --python ~/.pyenv/versions/3.12.1/bin/python  # + perf

The target interpreter needs sympy; py-spy is looked for beside this interpreter and on
PATH; perf only with a 3.12+ target (``-X perf``) and ``perf`` on PATH.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from profkit.sampler import SamplerOptions, SamplerSession  # noqa: E402

PROGRAM = r"""
import sys, time
time.sleep(float(sys.argv[1]))  # the samplers attach
from sympy import symbols, integrate, exp, cos
from sympy.core.cache import clear_cache
x = symbols("x")
for _ in range(int(sys.argv[2])):
    clear_cache()
    integrate(x**6 * exp(x) * cos(x), x)
"""
#: Leaves left out of every share: the program's top level (its start-up sleep, imports).
SKIP = {"<module>", ""}


def _shares(counts: dict[str, float]) -> dict[str, float]:
    kept = {k: v for k, v in counts.items() if k not in SKIP}
    total = sum(kept.values()) or 1.0
    return {k: 100.0 * v / total for k, v in kept.items()}


def _short(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def _py_spy_leaves(path: str) -> Counter[str]:
    out: Counter[str] = Counter()
    with open(path) as f:
        for line in f:
            stack, _, count = line.rstrip().rpartition(" ")
            if stack:
                out[_short(stack.split(";")[-1].split(" (")[0])] += int(count)
    return out


def _perf_leaves(data: str) -> Counter[str]:
    """The innermost ``py::`` frame of each sample (unwinding stops at the trampolines
    anyway); samples with none (start-up, native only) are left out."""
    text = subprocess.run(
        ["perf", "script", "-i", data, "-F", "ip,sym", "--no-inline"],
        capture_output=True,
        text=True,
    ).stdout
    out: Counter[str] = Counter()
    for sample in text.split("\n\n"):
        found = re.search(r"py::([^:\n]+)", sample)
        if found:
            out[_short(found.group(1))] += 1
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--python", default=sys.executable, help="the target's interpreter")
    ap.add_argument("--rate", type=float, default=1000.0)
    ap.add_argument("--mode", choices=("wall", "cpu"), default="wall")
    ap.add_argument("--repeat", type=int, default=1, help="integrals computed")
    ap.add_argument("--load", type=int, default=0, help="busy loops to run beside it")
    ap.add_argument("--focus", default="monomial_mul")
    ap.add_argument("--top", type=int, default=8)
    ap.add_argument("--no-perf", action="store_true")
    args = ap.parse_args()
    py = args.python
    spy = str(Path(py).with_name("py-spy"))
    if not os.path.exists(spy):
        spy = shutil.which("py-spy") or ""
    minor = subprocess.run(
        [py, "-c", "import sys; print(sys.version_info[1])"], capture_output=True, text=True
    ).stdout.strip()
    perf = (
        shutil.which("perf") if not args.no_perf and minor.isdigit() and int(minor) >= 12 else None
    )
    busy = [subprocess.Popen([sys.executable, "-c", "while 1: pass"]) for _ in range(args.load)]
    peers: list[subprocess.Popen[bytes]] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            prog = Path(tmp, "shares.py")
            prog.write_text(PROGRAM)
            flags = ["-X", "perf"] if perf else []
            target = subprocess.Popen([py, *flags, str(prog), "1.0", str(args.repeat)])
            session = SamplerSession(
                target.pid,
                SamplerOptions(rate=args.rate, mode=args.mode, follow_children=False),
                wait_s=5.0,
            )
            raw, data = os.path.join(tmp, "spy.txt"), os.path.join(tmp, "perf.data")
            if spy:
                cmd = [spy, "record", "-p", str(target.pid), "-r", str(int(args.rate))]
                cmd += ["-f", "raw", "--nonblocking", "-o", raw]
                peers.append(
                    subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                )
            if perf:
                cmd = [perf, "record", "-F", "999", "--call-graph", "dwarf,16384", "-o", data]
                cmd += ["-p", str(target.pid)]
                peers.append(
                    subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                )
            time.sleep(0.2)
            stats = session.run(until=lambda: target.poll() is not None)
            session.close()
            target.wait()
            for p in peers:
                p.wait()
            rec = session.recorders[target.pid]
            weight: Counter[str] = Counter()
            count: Counter[str] = Counter()
            for entry in rec.entries.values():
                if entry.stack:
                    leaf = _short(entry.stack[0][0].name)
                    weight[leaf] += entry.weight_ns
                    count[leaf] += entry.samples
            columns = {"pk weight": _shares(weight), "pk count": _shares(count)}
            if spy and os.path.exists(raw):
                columns["py-spy"] = _shares(_py_spy_leaves(raw))
            if perf and os.path.exists(data):
                columns["perf"] = _shares(_perf_leaves(data))
    finally:
        for p in busy:
            p.kill()
            p.wait()
    ranked = Counter(columns["pk count"])
    for shares in columns.values():
        ranked.update(shares)
    others = [n for n, _ in ranked.most_common() if n != args.focus]
    names = [args.focus, *others[: args.top]]
    skipped = " ".join(sorted(SKIP - {""}))
    print(
        f"python 3.{minor}, {args.mode} mode, {args.rate:g} Hz, load +{args.load} "
        f"(loadavg {os.getloadavg()[0]:.1f}); shares of leaf samples, % ({skipped} "
        "left out)"
    )
    print(f"{'function':16}" + "".join(f"{c:>11}" for c in columns))
    for n in names:
        print(f"{n[:16]:16}" + "".join(f"{columns[c].get(n, 0.0):11.1f}" for c in columns))
    ours = columns["pk weight"].get(args.focus, 0.0)
    ratios = [
        f"{ours / col[args.focus]:.2f} {c}" for c, col in columns.items() if col.get(args.focus)
    ]
    print(f"{args.focus}: profkit weight / each column: {', '.join(ratios[1:])}")
    print(
        f"profkit: {stats.ticks} reads of {stats.asked} asked, late {stats.late_ns / 1e9:.2f} s "
        f"of {stats.elapsed_ns / 1e9:.2f} s, torn {rec.torn_ticks}, "
        f"{stats.cost_us:.0f} us a read"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
