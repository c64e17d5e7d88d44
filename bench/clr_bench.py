"""CoreCLR profiler overhead: a call-dense C# program, bare vs under libprofkit_clr.so.

    python bench/clr_bench.py                  # best of 5
    python bench/clr_bench.py --repeat 3 --n-filtered 36   # quicker

Rows (every one against the bare program timed in the same run, alternating):

* filter matching nothing (``PROFKIT_NAMESPACE_PREFIX=NoSuchNamespace``): whole-process
  CPU time ÷ bare (goal ≤ 1.05), and the same net of start-up (large minus small input);
* every call of the program recorded (prefix ``Bench``): added ns per call, from the
  difference between a large and a small input (so start-up, JIT and the profiler's own
  start cancel out) ÷ the calls the profile counted (goal ≤ 100 ns);
* every Enter/Leave line streamed over UDP to a local receiver, for a run whose events fit
  the per-thread buffer (Fib(24) + 200,000 small calls: ~0.7 M lines): the writer
  thread's rate from the first datagram to the last, and whether it was lossless
  (sequence numbers, the sender's dropped count, lines received = lines sent, no event
  lost) (goal ≥ 1 M lines/s, lossless). A program producing lines faster than the writer
  formats and sends them loses events once its buffer is full (counted, never blocking).

Needs mono's ``mcs`` and a .NET host (``dotnetcore2``, ``PROFKIT_DOTNET`` or ``dotnet``).
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from dotnet_sample_common import build_cs

from profkit.clr.environment import profiler_environment
from profkit.clr.host import find_host
from profkit.clr.result import load_result
from profkit.settings import Settings

HERE = Path(__file__).parent
WORK = HERE / "_work" / "clr"


def build() -> Path:
    return build_cs(HERE / "clr" / "CallDense.cs", WORK)


def timed(cmd: list[str], env: dict[str, str]) -> float:
    """CPU seconds (user + system, every thread) of one run; wall time goes to WALL.

    CPU time, not wall time, is the measure: on a machine shared by many jobs (2 cores,
    load 8-14 while this was written) wall time mostly measures the queue. The profiler's
    writer thread is part of the process, so its work is counted.
    """
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    WALL.append(time.perf_counter() - start)
    if proc.returncode != 0:
        raise SystemExit(f"clr_bench: {cmd} exited with {proc.returncode}")
    return usage.ru_utime + usage.ru_stime


WALL: list[float] = []


class Receiver(threading.Thread):
    """Counts datagrams, lines and sequence gaps on a local UDP socket."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 20)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.lines = self.datagrams = self.gaps = 0
        self.first = self.last = 0.0
        self.next_seq = 0
        self.stop = False

    def run(self) -> None:
        while not self.stop:
            try:
                data = self.sock.recv(65536)
            except TimeoutError:
                continue
            self.last = time.perf_counter()
            if not self.datagrams:
                self.first = self.last
            header, _, body = data.partition(b"\n")
            seq = int(header.split(b" ")[2])
            self.gaps += seq != self.next_seq
            self.next_seq = seq + 1
            self.datagrams += 1
            self.lines += body.count(b"\n") + 1 if body else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=30, help="Fib(N), every-call row (default 30)")
    parser.add_argument("--m", type=int, default=2_000_000, help="small-method loops (default 2e6)")
    parser.add_argument(
        "--n-filtered",
        type=int,
        default=40,
        help="Fib(N), filter-matching-nothing row (default 40)",
    )
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    dll = build()
    host = find_host()
    base = dict(os.environ)
    for k in list(base):
        if k.startswith(("CORECLR_", "DOTNET_", "PROFKIT_")):
            del base[k]
    raw = str(WORK / "result.txt")
    big = [host.path, str(dll), str(args.n), str(args.m)]
    long = [host.path, str(dll), str(args.n_filtered), "0"]
    small = [host.path, str(dll), "10", "0"]

    def env_for(prefix: str, **extra: object) -> dict[str, str]:
        settings = Settings(prefixes=(prefix,)).replace(**extra)
        return base | profiler_environment(settings, output=raw)

    nothing = env_for("NoSuchNamespace")
    every = env_for("Bench")
    print(
        f"host: {host.path} ({host.source}); every call: Fib({args.n}) + {2 * args.m:,} small "
        f"calls; filtered: Fib({args.n_filtered}); best of {args.repeat}; CPU time"
    )
    timed(big, base)  # warm the page cache
    bare_long, bare_big, bare_small, none_big, none_small, all_big, all_small = (
        [] for _ in range(7)
    )
    for _ in range(args.repeat):
        bare_long.append(timed(long, base))
        bare_big.append(timed(big, base))
        none_big.append(timed(long, nothing))
        all_big.append(timed(big, every))
        bare_small.append(timed(small, base))
        none_small.append(timed(small, nothing))
        all_small.append(timed(small, every))
    calls_big = sum(int(line.split("\t")[5]) for line in _nodes(every, big))
    calls_small = sum(int(line.split("\t")[5]) for line in _nodes(every, small))
    bl, nb = min(bare_long), min(none_big)
    print(
        f"bare Fib({args.n_filtered}):              {bl:.3f} s CPU (median {statistics.median(bare_long):.3f})"
    )
    print(
        f"filter matching nothing:   {nb:.3f} s CPU -> {nb / bl:.3f}x bare whole process; "
        f"{(nb - min(none_small)) / (bl - min(bare_small)):.3f}x net of start-up (goal <= 1.05)"
    )
    b = min(bare_big)
    added = (min(all_big) - min(all_small)) - (b - min(bare_small))
    per_call = added / (calls_big - calls_small) * 1e9
    print(
        f"every call recorded:       {min(all_big):.3f} s CPU, {calls_big:,} calls -> "
        f"{per_call:.1f} ns CPU added per call (goal <= 100)"
    )
    rx = Receiver()
    rx.start()
    udp = env_for("Bench", udp=rx.sock.getsockname())
    timed([host.path, str(dll), "24", "200000"], udp)
    time.sleep(0.5)
    rx.stop = True
    rx.join()
    t = max(rx.last - rx.first, 1e-9)
    result = load_result(raw)
    lossless = (
        rx.gaps == 0 and not result.udp_dropped and rx.lines == result.lines and not result.lost
    )
    print(
        f"every line over UDP:       {rx.lines:,} lines in {rx.datagrams:,} datagrams over "
        f"{t:.3f} s (first to last) -> {rx.lines / t / 1e6:.2f} M lines/s; "
        f"{'lossless' if lossless else f'LOSS: gaps {rx.gaps}, sender dropped {result.udp_dropped}, sent {result.lines}, events lost {result.lost}'}"
        " (goal >= 1 M lines/s, lossless)"
    )


def _nodes(env: dict[str, str], cmd: list[str]) -> list[str]:
    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, check=True)
    text = Path(env["PROFKIT_CLR_OUTPUT"]).read_text()
    return [line for line in text.splitlines() if line.startswith("node\t")]


if __name__ == "__main__":
    main()
