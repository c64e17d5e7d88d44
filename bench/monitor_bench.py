"""Monitor throughput: lines/s received with no loss on loopback, and the sender's cost.

A sender process (this file with ``--send``) paces ELT-style event lines, batched into
datagrams exactly as the profiler batches them to a loopback address (up to 16 KB,
``--datagram 1400`` for the network size), at rising rates in lines/s; the receiver
runs in this process. For each rate it reports what arrived and what was lost; the
result is the highest rate with zero loss. Three receivers, measured in the same run:

* ``profkit``: the real ``serve`` loop, ``Monitor`` and plain view writing to /dev/null;
* ``ceiling``: batch receive only (``recvmmsg``), counting lines, no parsing: the most
  any Python receiver can take on this machine, the peer the ratio is against;
* ``naive``: a monitor in the style of the seed article's (``recvfrom`` + decode + print
  every line).

The sender side is measured too: the ELT profiler's ``UdpSender.write_lines`` (batching,
encoding, sending) in lines/s, against the bare ``join`` + ``encode`` + ``send`` of the
same lines.

    python bench/monitor_bench.py [--seconds 1.0] [--max-rate 3000000] [--datagram 16384]

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
from profkit.monitor.receive import receiver
from profkit.monitor.server import open_socket, serve
from profkit.monitor.view import PlainView
from profkit.profilers.elt.sinks import UdpSender
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
    """Send datagrams at ``rate`` lines per second for ``seconds``; print what was sent.

    The bodies are encoded once: this sender must outrun the receivers, so it does
    no more per datagram than put a header in front."""
    batches = _batches()
    bodies = [("\n" + "\n".join(chunk)).encode() for chunk in batches]
    counts = [len(chunk) for chunk in batches]
    per = sum(counts) / len(counts)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    sock.connect(("127.0.0.1", port))
    total = int(rate * seconds / per)
    dgram_rate = rate / per
    start = time.perf_counter()
    sent = lines = 0
    for seq in range(total):
        i = seq % len(bodies)
        sock.send(b"PK1 bench/1 %d 0" % seq + bodies[i])
        sent += 1
        lines += counts[i]
        if seq % 8 == 7:  # pace: sleep when ahead of schedule
            ahead = (seq + 1) / dgram_rate - (time.perf_counter() - start)
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
    result.update(received=t.received, lines=t.lines, unanalysed=monitor.unanalysed)


def _ceiling_receiver(sock: socket.socket, stop: threading.Event, result: dict[str, int]) -> None:
    """Batch receive and count lines: every cost but the parsing and the display."""
    import select

    sock.setblocking(False)
    receive = receiver(sock)
    received = lines = 0
    while not stop.is_set():
        datagrams = receive()
        if not datagrams:
            select.select([sock], [], [], 0.02)
            continue
        received += len(datagrams)
        for data in datagrams:
            lines += bytes(data).count(b"\n")
    result.update(received=received, lines=lines)


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


RECEIVERS = {
    "profkit": _profkit_receiver,
    "ceiling": _ceiling_receiver,
    "naive": _naive_receiver,
}


def measure(kind: str, rate: float, seconds: float) -> dict[str, float]:
    """One step: the receiver in a thread here, the sender in another process."""
    sock = open_socket("127.0.0.1", 0)
    port = sock.getsockname()[1]
    stop = threading.Event()
    result: dict[str, int] = {}
    thread = threading.Thread(target=RECEIVERS[kind], args=(sock, stop, result))
    thread.start()
    time.sleep(0.05)
    sent, sent_lines, elapsed = _run_sender(port, rate, seconds)
    _drained(port)  # the receiver may still be working through its socket buffer
    kernel_drops = _udp_queue(port)[1]
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
        "kernel_drops": kernel_drops,
        "unanalysed": result.get("unanalysed", 0),
    }


def _udp_queue(port: int) -> tuple[int, int]:
    """(bytes queued, datagrams dropped) of the loopback UDP socket on ``port``, from
    /proc/net/udp (Linux); (0, -1) elsewhere. The kernel's drop count is the independent
    witness of loss: the receiver's own count could be wrong the same way as its parsing."""
    try:
        with open("/proc/net/udp") as f:
            rows = f.read().splitlines()[1:]
    except OSError:
        return 0, -1
    for row in rows:
        cols = row.split()
        if cols[1] == f"0100007F:{port:04X}":
            return int(cols[4].split(":")[1], 16), int(cols[-1])
    return 0, -1


def _drained(port: int, limit: float = 30.0) -> None:
    """Wait until the receiver has taken everything queued (a bound, not a timing)."""
    deadline = time.monotonic() + limit
    time.sleep(0.1)
    while _udp_queue(port)[0] and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.1)  # the last batch taken off the queue is being parsed


def processing_rate(seconds: float) -> tuple[float, float]:
    """Datagrams/s and lines/s through ``Monitor.feed`` + plain view alone (no socket):
    the ceiling the receive loop can reach on this machine, steadier than the loopback steps."""
    batches = _batches()
    data = [protocol.encode("bench/1", i, 0, batches[i % len(batches)]) for i in range(2000)]
    lines_per_round = sum(len(batches[i % len(batches)]) for i in range(2000))
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


def sender_rate(seconds: float) -> tuple[float, float]:
    """Lines/s through the profiler's ``UdpSender.write_lines`` and through the bare peer
    (``join`` + ``encode`` + ``send`` of ready-made 16 KB batches), to a drained socket."""
    lines = _lines(20_000)
    batches = _batches()
    sink = open_socket("127.0.0.1", 0)
    sink.setblocking(False)
    drain = receiver(sink)
    address = sink.getsockname()
    sender = UdpSender(address, "bench/1")
    sender.max_datagram = DATAGRAM  # as --datagram says (it picks 16 KB for loopback itself)
    peer = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    peer.connect(address)

    def udp_sender() -> int:
        sender.write_lines(lines)
        return len(lines)

    def bare() -> int:
        for chunk in batches:
            peer.send(("PK1 bench/1 0 0\n" + "\n".join(chunk)).encode())
        return sum(map(len, batches))

    rates = []
    for fn in (udp_sender, bare):
        done = 0
        spent = 0.0
        while spent < seconds:
            start = time.perf_counter()
            done += fn()
            spent += time.perf_counter() - start
            while drain():  # not timed: the receiver's work
                pass
        rates.append(done / spent)
    assert sender.dropped == 0, f"the sender dropped {sender.dropped} lines"
    sender.close()
    peer.close()
    sink.close()
    return rates[0], rates[1]


def best_lossless(kind: str, rates: list[float], seconds: float) -> tuple[float, float]:
    """The highest lines/s a receiver took without loss, and without loss *and* with every
    datagram analysed (the steps stop at the first loss)."""
    best = whole = 0.0
    for rate in rates:
        r = measure(kind, rate, seconds)
        lines_s = r["lines"] / r["elapsed"]
        print(
            f"  {kind:8} target {rate:>9.0f} lines/s: sent {r['sent']:>6} datagrams in "
            f"{r['elapsed']:.2f} s, received {r['received']:>6} ({lines_s:>9.0f} lines/s), "
            f"lost {r['lost']} (kernel drops {r['kernel_drops']})"
            + (f", {r['unanalysed']} not analysed" if r["unanalysed"] else ""),
            flush=True,
        )
        if r["lost"] > 0:
            break
        best = max(best, lines_s)
        if not r["unanalysed"]:
            whole = max(whole, lines_s)
        if r["elapsed"] > seconds * 1.5:
            break  # the sender itself cannot go faster
    return best, whole


STEPS = (
    250_000,
    500_000,
    750_000,
    1_000_000,
    1_250_000,
    1_500_000,
    2_000_000,
    2_500_000,
    3_000_000,
)


def main() -> None:
    global DATAGRAM
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=1.0, help="length of each step")
    parser.add_argument(
        "--max-rate", type=float, default=3_000_000, help="highest lines/s tried (3000000)"
    )
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
    rates = [float(r) for r in STEPS if r <= args.max_rate]
    print(
        f"monitor throughput on loopback, ~{per} lines per datagram, {args.seconds:.1f} s per step"
    )
    dgram_s, lines_s = processing_rate(args.seconds)
    print(
        f"in-process processing (feed + plain view, no socket): {dgram_s:.0f} datagrams/s = "
        f"{lines_s:.0f} lines/s"
    )
    ours, bare = sender_rate(args.seconds)
    print(
        f"sender (UdpSender.write_lines): {ours:.0f} lines/s; bare join+encode+send: "
        f"{bare:.0f} lines/s; ratio {ours / bare:.2f}x"
    )
    results = {kind: best_lossless(kind, rates, args.seconds) for kind in RECEIVERS}
    for kind, (best, whole) in results.items():
        extra = f" ({whole:.0f} lines/s with every datagram analysed)" if kind == "profkit" else ""
        print(f"{kind:8} highest lossless: {best:>10.0f} lines/s{extra}")
    ceiling = results["ceiling"][0] or 1.0
    ours = results["profkit"][0]
    print(
        f"ratio profkit/ceiling: {ours / ceiling:.2f}x, "
        f"profkit/naive: {ours / (results['naive'][0] or 1.0):.2f}x "
        f"(target: profkit >= 1000000 lines/s lossless)"
    )


if __name__ == "__main__":
    main()
