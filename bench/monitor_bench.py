"""Monitor throughput: datagrams/s and lines/s received with no loss on loopback.

A sender process (this file with ``--send``) paces ELT-style event lines, batched into
datagrams exactly as the profiler batches them to a loopback address (up to 16 KB,
``--datagram 1400`` for the network size), at rising rates; the monitor runs
in-process (the real ``serve`` loop, ``Monitor`` and plain view writing to /dev/null).
For each rate it reports what arrived and what was lost; the result is the highest rate
with zero loss. The peer measured in the same run is a naive monitor in the style of the
seed article's (``recvfrom`` + decode + print every line, no batching).

    python bench/monitor_bench.py [--seconds 1.0] [--max-rate 200000] [--datagram 16384]

Target (issue #11): at least 1,000,000 lines/s lossless on loopback.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import threading
import time

from profkit.monitor.core import Monitor
from profkit.monitor.server import open_socket, serve
from profkit.monitor.view import PlainView
from profkit.wire import udp as protocol


def _lines(count: int) -> list[str]:
    out = []
    depth = 0
    for i in range(count):
        name = f"myapp.module{i % 7}.function_{i % 13}"
        if i % 2 == 0:
            out.append("    " * depth + f"Enter: {name}")
            depth = min(depth + 1, 6)
        else:
            depth = max(depth - 1, 0)
            out.append("    " * depth + f"Leave: {name}, Duration: {i % 997}.250 us")
    return out


DATAGRAM = protocol.MAX_LOOPBACK_DATAGRAM


def _batches() -> list[list[str]]:
    return protocol.batch(_lines(20_000), max_datagram=DATAGRAM)[:-1]


def send(port: int, rate: float, seconds: float) -> None:
    """Send datagrams at ``rate`` per second for ``seconds``; print how many were sent."""
    batches = _batches()
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.connect(("127.0.0.1", port))
    total = int(rate * seconds)
    start = time.perf_counter()
    sent = lines = 0
    for seq in range(total):
        chunk = batches[seq % len(batches)]
        sock.send(protocol.encode("bench/1", seq, 0, chunk))
        sent += 1
        lines += len(chunk)
        if seq % 32 == 31:  # pace: sleep when ahead of schedule
            ahead = (seq + 1) / rate - (time.perf_counter() - start)
            if ahead > 0:
                time.sleep(ahead)
    elapsed = time.perf_counter() - start
    print(sent, lines, f"{elapsed:.6f}")


def _args(*values: float) -> list[str]:
    return [str(v) for v in values]


def _run_sender(port: int, rate: float, seconds: float) -> tuple[int, int, float]:
    out = subprocess.run(
        [
            sys.executable,
            __file__,
            "--datagram",
            str(DATAGRAM),
            "--send",
            *_args(port, rate, seconds),
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return int(out[0]), int(out[1]), float(out[2])


def _profkit_receiver(sock: socket.socket, stop: threading.Event, result: dict[str, int]) -> None:
    monitor = Monitor()
    with open(os.devnull, "w") as devnull:
        view = PlainView(devnull)
        serve(sock, monitor, view, stop=stop, idle_timeout=0.02)
        view.close(monitor)
    t = monitor.totals()
    result.update(received=t.received, lines=t.lines, lost=t.lost, malformed=monitor.malformed)


def _naive_receiver(sock: socket.socket, stop: threading.Event, result: dict[str, int]) -> None:
    sock.settimeout(0.02)
    received = lines = 0
    with open(os.devnull, "w") as devnull:
        while not stop.is_set():
            try:
                data, _ = sock.recvfrom(65535)
            except TimeoutError:
                continue
            received += 1
            for line in data.decode("utf-8").split("\n")[1:]:
                print(line, file=devnull, flush=True)
                lines += 1
    result.update(received=received, lines=lines)


def measure(kind: str, rate: float, seconds: float) -> dict[str, float]:
    """One step: the receiver in a thread here, the sender in another process."""
    sock = open_socket("127.0.0.1", 0)
    port = sock.getsockname()[1]
    stop = threading.Event()
    result: dict[str, int] = {}
    target = _profkit_receiver if kind == "profkit" else _naive_receiver
    thread = threading.Thread(target=target, args=(sock, stop, result))
    thread.start()
    time.sleep(0.05)
    sent, sent_lines, elapsed = _run_sender(port, rate, seconds)
    time.sleep(0.3)  # let the receiver drain its socket buffer
    stop.set()
    thread.join()
    sock.close()
    return {
        "sent": sent,
        "sent_lines": sent_lines,
        "elapsed": elapsed,
        "received": result["received"],
        "lines": result["lines"],
        "lost": sent - result["received"],
    }


def processing_rate(seconds: float) -> tuple[float, float]:
    """Datagrams/s and lines/s through ``Monitor.feed`` + plain view alone (no socket):
    the ceiling the receive loop can reach on this machine, steadier than the loopback steps."""
    batches = _batches()
    data = [protocol.encode("bench/1", i, 0, batches[i % len(batches)]) for i in range(5000)]
    lines_per_round = sum(len(batches[i % len(batches)]) for i in range(5000))
    rounds = 0
    with open(os.devnull, "w") as devnull:
        view = PlainView(devnull)
        start = time.perf_counter()
        while time.perf_counter() - start < seconds:
            monitor = Monitor()  # fresh each round, so no datagram is a duplicate
            for d in data:
                result = monitor.feed(d, 0.0)
                if result is not None:
                    view.show(monitor, *result)
            view.tick(monitor)
            rounds += 1
        elapsed = time.perf_counter() - start
    return rounds * len(data) / elapsed, rounds * lines_per_round / elapsed


def best_lossless(kind: str, rates: list[float], seconds: float) -> dict[str, float]:
    best: dict[str, float] = {"dgram_s": 0.0, "lines_s": 0.0}
    for rate in rates:
        r = measure(kind, rate, seconds)
        dgram_s = r["received"] / r["elapsed"]
        lines_s = r["lines"] / r["elapsed"]
        print(
            f"  {kind:8} target {rate:>9.0f} dgram/s: sent {r['sent']:>7} in {r['elapsed']:.2f} s, "
            f"received {r['received']:>7} ({dgram_s:>9.0f} dgram/s, {lines_s:>10.0f} lines/s), "
            f"lost {r['lost']}"
        )
        if r["lost"] > 0:
            break
        if dgram_s > best["dgram_s"]:
            best = {"dgram_s": dgram_s, "lines_s": lines_s}
        if r["elapsed"] > seconds * 1.5:
            break  # the sender itself cannot go faster
    return best


def main() -> None:
    global DATAGRAM
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=1.0, help="length of each step")
    parser.add_argument("--max-rate", type=float, default=160_000, help="highest datagrams/s tried")
    parser.add_argument(
        "--datagram",
        type=int,
        default=protocol.MAX_LOOPBACK_DATAGRAM,
        help="largest datagram, bytes (16384)",
    )
    parser.add_argument("--send", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    DATAGRAM = args.datagram
    if args.send:
        send(int(args.send[0]), float(args.send[1]), float(args.send[2]))
        return
    per = len(_batches()[0])
    rates = [
        r
        for r in (
            1000,
            2000,
            4000,
            6000,
            9000,
            13_500,
            20_000,
            30_000,
            45_000,
            67_500,
            100_000,
            150_000,
        )
        if r <= args.max_rate
    ]
    print(
        f"monitor throughput on loopback, ~{per} lines per datagram, {args.seconds:.1f} s per step"
    )
    dgram_s, lines_s = processing_rate(args.seconds)
    print(
        f"in-process processing (feed + plain view, no socket): {dgram_s:.0f} datagrams/s = "
        f"{lines_s:.0f} lines/s"
    )
    results = {kind: best_lossless(kind, rates, args.seconds) for kind in ("profkit", "naive")}
    for kind, best in results.items():
        print(
            f"{kind:8} highest lossless: {best['dgram_s']:>9.0f} datagrams/s = "
            f"{best['lines_s']:>10.0f} lines/s"
        )
    naive = results["naive"]["lines_s"] or 1.0
    print(
        f"ratio profkit/naive (lossless lines/s): {results['profkit']['lines_s'] / naive:.2f}x "
        f"(target: >= 1000000 lines/s)"
    )


if __name__ == "__main__":
    main()
