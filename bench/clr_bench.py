"""CoreCLR profiler overhead: a call-dense C# program, bare vs under libprofkit_clr.so.

    python bench/clr_bench.py                  # N=30 (2.7 M Fib calls) + 2 M small calls, best of 5
    python bench/clr_bench.py --n 25 --m 200000 --repeat 3   # quick look

Rows (every one against the bare program timed in the same run, alternating):

* filter matching nothing (``PROFKIT_NAMESPACE_PREFIX=NoSuchNamespace``): whole-process
  wall time ÷ bare (goal ≤ 1.05);
* every call of the program recorded (prefix ``Bench``): added ns per call, from the
  difference between a large and a small input (so start-up, JIT and the profiler's own
  start cancel out) ÷ the calls the profile counted (goal ≤ 100 ns);
* the same with every Enter/Leave line streamed over UDP to a local receiver: lines/s,
  and whether it was lossless (sequence numbers, the sender's dropped count, the lines
  received = the lines sent) (goal ≥ 1 M lines/s, lossless).

Needs mono's ``mcs`` and a .NET host (``dotnetcore2``, ``PROFKIT_DOTNET`` or ``dotnet``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

from profkit.clr.environment import profiler_environment
from profkit.clr.host import find_host
from profkit.clr.result import load_result
from profkit.settings import Settings

HERE = Path(__file__).parent
WORK = HERE / "_work" / "clr"
RUNTIMECONFIG = {
    "runtimeOptions": {
        "framework": {"name": "Microsoft.NETCore.App", "version": "3.1.0"},
        "configProperties": {"System.Globalization.Invariant": True},
    }
}


def build() -> Path:
    mcs = shutil.which("mcs")
    if mcs is None:
        sys.exit("clr_bench: mcs (mono-mcs) is not installed")
    WORK.mkdir(parents=True, exist_ok=True)
    dll = WORK / "CallDense.dll"
    subprocess.run(
        [mcs, "-nologo", "-optimize+", f"-out:{dll}", str(HERE / "clr" / "CallDense.cs")],
        check=True,
    )
    (WORK / "CallDense.runtimeconfig.json").write_text(json.dumps(RUNTIMECONFIG))
    return dll


def timed(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


class Receiver(threading.Thread):
    """Counts datagrams, lines and sequence gaps on a local UDP socket."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 20)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.lines = self.datagrams = self.gaps = 0
        self.next_seq = 0
        self.stop = False

    def run(self) -> None:
        while not self.stop:
            try:
                data = self.sock.recv(65536)
            except TimeoutError:
                continue
            header, _, body = data.partition(b"\n")
            seq = int(header.split(b" ")[2])
            self.gaps += seq != self.next_seq
            self.next_seq = seq + 1
            self.datagrams += 1
            self.lines += body.count(b"\n") + 1 if body else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=30, help="Fib(N) in the large run (default 30)")
    parser.add_argument(
        "--m", type=int, default=1_000_000, help="small-method loop count (default 1e6)"
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
    small = [host.path, str(dll), "10", "0"]

    def env_for(prefix: str, **extra: object) -> dict[str, str]:
        settings = Settings(prefixes=(prefix,)).replace(**extra)
        return base | profiler_environment(settings, output=raw)

    nothing = env_for("NoSuchNamespace")
    every = env_for("Bench")
    print(
        f"host: {host.path} ({host.source}); Fib({args.n}) + {2 * args.m} small calls; best of {args.repeat}"
    )
    timed(big, base)  # warm the page cache
    bare_big, bare_small, none_big, all_big, all_small = [], [], [], [], []
    for _ in range(args.repeat):
        bare_big.append(timed(big, base))
        none_big.append(timed(big, nothing))
        all_big.append(timed(big, every))
        bare_small.append(timed(small, base))
        all_small.append(timed(small, every))
    calls_big = sum(int(line.split("\t")[5]) for line in _nodes(every, big))
    calls_small = sum(int(line.split("\t")[5]) for line in _nodes(every, small))
    b, nb = min(bare_big), min(none_big)
    print(f"bare:                      {b:.3f} s (median {statistics.median(bare_big):.3f})")
    print(f"filter matching nothing:   {nb:.3f} s -> {nb / b:.3f}x bare (goal <= 1.05)")
    added = (min(all_big) - min(all_small)) - (b - min(bare_small))
    per_call = added / (calls_big - calls_small) * 1e9
    print(
        f"every call recorded:       {min(all_big):.3f} s, {calls_big:,} calls -> "
        f"{per_call:.1f} ns added per call (goal <= 100)"
    )
    rx = Receiver()
    rx.start()
    udp = env_for("Bench", udp=rx.sock.getsockname())
    t = timed(big, udp)
    time.sleep(0.5)
    rx.stop = True
    rx.join()
    result = load_result(raw)
    lossless = rx.gaps == 0 and result.udp_dropped == 0 and rx.lines == result.lines
    print(
        f"every line over UDP:       {t:.3f} s, {rx.lines:,} lines in {rx.datagrams:,} datagrams -> "
        f"{rx.lines / t / 1e6:.2f} M lines/s whole run, "
        f"{rx.lines / max(t - min(all_small), 1e-9) / 1e6:.2f} M lines/s net of start-up; "
        f"{'lossless' if lossless else f'LOSS: gaps {rx.gaps}, sender dropped {result.udp_dropped}, sent {result.lines}'}"
        " (goal >= 1 M lines/s, lossless)"
    )


def _nodes(env: dict[str, str], cmd: list[str]) -> list[str]:
    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, check=True)
    text = Path(env["PROFKIT_CLR_OUTPUT"]).read_text()
    return [line for line in text.splitlines() if line.startswith("node\t")]


if __name__ == "__main__":
    main()
