"""What sampling a .NET program through EventPipe costs it: the target's own CPU time.

    python bench/dotnet_sample_bench.py                # 3 rounds, work 150
    python bench/dotnet_sample_bench.py --repeat 5 --rounds 300

The C# program (tests/dotnet/programs/Sampled.cs, ``work N``) does a fixed amount of work
(N rounds of a recursive Fib(20) and a numeric loop: calls for the ELT hooks, arithmetic
for the sampler) and prints its wall time for the work and its whole process CPU time
(``Process.TotalProcessorTime``: the runtime's threads included, so the sampler thread
and EventPipe's buffers count). Three ways, alternating, in one run:

* bare: ``dotnet Sampled.dll work N``;
* sample: ``profkit run --mode sample`` (the runtime's sample profiler at 1 kHz, the
  EventPipe session, the rundown at the end);
* trace: ``profkit run`` (profkit's ELT profiler, libprofkit_clr.so, every call hooked).

Printed: the medians and each mode's ratio to bare. Nothing is asserted (a busy machine).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from dotnet_sample_common import build, host, load_avg, profkit


def _numbers(stdout: str) -> tuple[float, float]:
    values = {}
    for line in stdout.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] in ("work", "cpu"):
            values[parts[0]] = float(parts[1])
    return values["work"], values["cpu"]


def once(mode: str, dll: Path, rounds: int, out: Path) -> tuple[float, float]:
    program = [str(dll), "work", str(rounds)]
    if mode == "bare":
        argv = [host(), *program]
    elif mode == "sample":
        argv = [*profkit(), "run", "--mode", "sample", "-o", str(out), *program]
    else:
        argv = [*profkit(), "run", "-o", str(out), *program]
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode:
        sys.exit(f"{mode}: {proc.stderr}")
    return _numbers(proc.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=150)
    args = parser.parse_args()
    dll = build()
    modes = ("bare", "sample", "trace")
    results: dict[str, list[tuple[float, float]]] = {m: [] for m in modes}
    print(f"load average {load_avg()} at start")
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeat):
            for mode in modes:
                results[mode].append(once(mode, dll, args.rounds, Path(tmp) / f"{mode}{i}.json"))
    bare_wall = statistics.median(w for w, _ in results["bare"])
    bare_cpu = statistics.median(c for _, c in results["bare"])
    for mode in modes:
        wall = statistics.median(w for w, _ in results[mode])
        cpu = statistics.median(c for _, c in results[mode])
        print(
            f"{mode:6}  work {wall:8.1f} ms ({wall / bare_wall:4.2f}x bare)  "
            f"process CPU {cpu:8.1f} ms ({cpu / bare_cpu:4.2f}x bare)"
        )
    print(f"load average {load_avg()} at end")


if __name__ == "__main__":
    main()
