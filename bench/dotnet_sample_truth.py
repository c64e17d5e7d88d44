"""Does the .NET sampler see what the program's own clock saw? Phase shares vs Stopwatch.

    python bench/dotnet_sample_truth.py              # phases of 1500 ms, both routes
    python bench/dotnet_sample_truth.py --ms 800 --repeat 2

The C# program (tests/dotnet/programs/Sampled.cs, ``phases``) runs three phases, Alpha,
Beta and Gamma, timing each with its own ``Stopwatch`` and printing the times. It is
sampled two ways in one run: ``profkit run --mode sample`` (from its start) and ``profkit
attach`` on the already running program (``phases-wait``: it waits for a line on stdin,
sent once profkit says it is sampling). For each: every phase's inclusive share of the
three (profkit's tree vs the program's timers, goal: within 5 points), and the main
thread's samples per second over the phases (goal: >= 800; every ThreadSample event the
runtime delivered for that thread is counted, managed and external, and the raw count is
printed). Nothing is asserted: a busy machine moves these numbers, so they are printed
with the load average.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from dotnet_sample_common import build, host, load_avg, profkit

from profkit.calltree.file import load
from profkit.calltree.model import CallProfile

PHASES = ("Alpha", "Beta", "Gamma")


def _timers(stdout: str) -> dict[str, float]:
    out = {}
    for line in stdout.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == "phase":
            out[parts[1]] = float(parts[2])
    return out


def _inclusive(profile: CallProfile, pid: int) -> dict[str, int]:
    """Each phase method's inclusive ns on the main thread."""
    found = dict.fromkeys(PHASES, 0)
    for thread in profile.threads:
        if thread.thread_id != pid:
            continue
        pending = [thread.root]
        while pending:
            node = pending.pop()
            for child in node.children.values():
                name = profile.frames[child.frame].name
                phase = name.rsplit(".", 1)[-1]
                if name.startswith("SampleTest.Phases.") and phase in found:
                    found[phase] += child.inclusive_ns
                    continue
                pending.append(child)
    return found


def _phase_samples(profile: CallProfile, pid: int) -> int:
    total = 0
    for thread in profile.threads:
        if thread.thread_id != pid:
            continue
        pending = [thread.root]
        while pending:
            node = pending.pop()
            for child in node.children.values():
                if profile.frames[child.frame].name == "SampleTest.Phases.Run":
                    total += child.calls
                else:
                    pending.append(child)
    return total


def _row(route: str, profile: CallProfile, pid: int, timers: dict[str, float]) -> None:
    incl = _inclusive(profile, pid)
    total_p = sum(incl.values()) or 1
    total_t = sum(timers.values()) or 1
    worst = 0.0
    cells = []
    for ph in PHASES:
        mine = 100.0 * incl[ph] / total_p
        theirs = 100.0 * timers.get(ph, 0) / total_t
        worst = max(worst, abs(mine - theirs))
        cells.append(f"{ph} {mine:5.1f}% vs {theirs:5.1f}%")
    samples = _phase_samples(profile, pid)
    rate = samples / (total_t / 1000.0)
    raw = profile.metadata["sampler"]["threads"].get(str(pid), {})
    print(
        f"{route:7}  " + "  ".join(cells) + f"  | worst {worst:4.1f} pts (goal <= 5)  "
        f"main thread {rate:5.0f} samples/s over the phases (goal >= 800; raw ThreadSample "
        f"events for it: {raw.get('managed', 0)} managed + {raw.get('external', 0)} external)"
    )


def run_route(dll: Path, ms: int, out: Path) -> None:
    proc = subprocess.run(
        [*profkit(), "run", "--mode", "sample", "-o", str(out), str(dll), "phases", str(ms)],
        capture_output=True,
        text=True,
    )
    if proc.returncode:
        sys.exit(proc.stderr)
    profile = load(out)
    _row("run", profile, int(profile.metadata["pid"]), _timers(proc.stdout))


def attach_route(dll: Path, ms: int, out: Path) -> None:
    target = subprocess.Popen(
        [host(), str(dll), "phases-wait", str(ms)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert target.stdout is not None and target.stdin is not None
    assert target.stdout.readline().strip() == "ready"
    attach = subprocess.Popen(
        [*profkit(), "attach", str(target.pid), "-o", str(out), "--no-tree"],
        stderr=subprocess.PIPE,
        text=True,
    )
    assert attach.stderr is not None
    attach.stderr.readline()  # "profkit: sampling pid ..."
    time.sleep(1.0)  # the session is up and the early rundown done
    target.stdin.write("go\n")
    target.stdin.flush()
    stdout = target.stdout.read()
    target.wait()
    _, err = attach.communicate()
    if attach.returncode:
        sys.exit(err)
    _row("attach", load(out), target.pid, _timers(stdout))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--ms", type=int, default=1500, help="Alpha's length (Beta 1.5x, Gamma 0.5x)"
    )
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    dll = build()
    print(f"load average {load_avg()} at start")
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeat):
            run_route(dll, args.ms, Path(tmp) / f"run{i}.json")
            attach_route(dll, args.ms, Path(tmp) / f"attach{i}.json")
    print(f"load average {load_avg()} at end")


if __name__ == "__main__":
    main()
