"""UDP streaming from a real program: does every line a profiled program sends reach the monitor?

Two processes, as a user runs them: ``profkit monitor`` (``--quiet``, or printing every
line to a file with ``--print``) receives; ``profkit run --udp`` runs an asyncio program
with many short tasks (bench/workloads/many_tasks.py, ~2.5 M event lines at the default
size). Per run it reports

* **sent**: datagrams the sender handed to the kernel (the profile's
  ``udp_datagrams_sent``) and lines dropped at the sender (``lines_dropped``: its queue
  cap or a refused send, counted once);
* **expected lines**: two per recorded call (Enter + Leave) from the saved profile: an
  oracle independent of the sender's and the monitor's counting;
* **received**: datagrams and lines from the monitor's summary, its ``lost`` count
  (sequence gaps) and the kernel's drop count of the monitor's socket (/proc/net/udp);
* **lost** = sent − received datagrams; line loss = expected − received − dropped.

The goal (issue #11 item 6): 0 lost datagrams in every run on a loaded machine. The load
average is printed before and after, since the result depends on it.

    python bench/udp_real.py [--runs 5] [--tasks 20000] [--print] [--peer] [--monitor-nice N]

``--peer`` interleaves runs against ``profkit monitor --no-acks``: the same sender and
monitor without flow control (what this measured before acknowledgements existed).

The throughput peer is ``bench/monitor_bench.py`` (lossless lines/s of the receiver).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WORKLOAD = Path(__file__).with_name("workloads") / "many_tasks.py"
_SUMMARY = re.compile(
    r"(\d+) senders?, (\d+) datagrams, (\d+) lines, (\d+) lost, (\d+) malformed, "
    r"(\d+) dropped at senders"
)
#: ``--monitor-nice``: the monitor gets less CPU than the program (a monitor slower than
#: its sender, which a quiet machine does not show)
MONITOR_NICE = 0
_LISTENING = re.compile(rb"listening on udp 127\.0\.0\.1:(\d+)")


def _udp_socket(port: int) -> tuple[int, int]:
    """(bytes queued, datagrams the kernel dropped) of the socket bound to 127.0.0.1:port."""
    try:
        rows = Path("/proc/net/udp").read_text().splitlines()[1:]
    except OSError:
        return 0, -1
    for row in rows:
        cols = row.split()
        if cols[1] == f"0100007F:{port:04X}":
            return int(cols[4].split(":")[1], 16), int(cols[-1])
    return 0, -1


def _start_monitor(
    python: str, out: Path, quiet: bool, acks: bool
) -> tuple[subprocess.Popen[bytes], int]:
    cmd = [python, "-m", "profkit", "monitor", "--listen", "127.0.0.1:0", "--plain"]
    if MONITOR_NICE:
        cmd = ["nice", "-n", str(MONITOR_NICE), *cmd]
    if quiet:
        cmd.append("--quiet")
    if not acks:
        cmd.append("--no-acks")
    monitor = subprocess.Popen(cmd, stdout=out.open("wb"), stderr=subprocess.PIPE)
    assert monitor.stderr is not None
    line = monitor.stderr.readline()
    match = _LISTENING.search(line)
    if not match:
        monitor.kill()
        raise SystemExit(f"monitor did not start: {line!r}")
    return monitor, int(match.group(1))


def _drain(port: int, limit: float = 60.0) -> None:
    """Wait until the monitor has taken everything queued on its socket (a bound)."""
    deadline = time.monotonic() + limit
    time.sleep(0.2)
    while _udp_socket(port)[0] and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.2)


def one_run(python: str, tasks: int, quiet: bool, acks: bool, tmp: Path) -> dict[str, float]:
    """One monitor, one profiled program; the counts of both sides and the kernel's."""
    out = tmp / "monitor.out"
    profile = tmp / "profile.json"
    monitor, port = _start_monitor(python, out, quiet, acks)
    try:
        start = time.perf_counter()
        subprocess.run(
            [
                *(python, "-m", "profkit", "run", "--udp", f"127.0.0.1:{port}", "--no-tree"),
                *("-o", str(profile), str(WORKLOAD), str(tasks)),
            ],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        elapsed = time.perf_counter() - start
        _drain(port)
        kernel_drops = _udp_socket(port)[1]
    finally:
        monitor.send_signal(signal.SIGINT)
        _, err = monitor.communicate(timeout=60)
    text = out.read_text(encoding="utf-8", errors="replace")
    found = _SUMMARY.findall(text)
    if not found:
        raise SystemExit(f"no monitor summary: {err.decode(errors='replace')[-500:]}")
    _, datagrams, lines, lost, malformed, dropped_seen = map(int, found[-1])
    data = json.loads(profile.read_text())
    meta = data["metadata"]
    expected = 2 * sum(n[2] for t in data["threads"] for n in t["nodes"][1:])
    return {
        "elapsed": elapsed,
        "program": meta.get("duration_ns", 0) / 1e9,
        "sent": meta.get("udp_datagrams_sent", 0),
        "sender_dropped": meta.get("lines_dropped", 0),
        "expected_lines": expected,
        "received": datagrams,
        "lines": lines,
        "monitor_lost": lost,
        "malformed": malformed,
        "dropped_seen": dropped_seen,
        "kernel_drops": kernel_drops,
        "lost": meta.get("udp_datagrams_sent", 0) - datagrams,
        "lines_lost": expected - lines - meta.get("lines_dropped", 0),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--tasks", type=int, default=20000, help="asyncio tasks (~123 lines each)")
    parser.add_argument(
        "--print", action="store_true", help="the monitor prints every line (to a file)"
    )
    parser.add_argument("--python", default=sys.executable, help="interpreter of both sides")
    parser.add_argument(
        "--peer",
        action="store_true",
        help="also run each step with 'profkit monitor --no-acks' (no flow control), interleaved",
    )
    parser.add_argument(
        "--monitor-nice",
        type=int,
        default=0,
        metavar="N",
        help="run the monitor under 'nice -n N' (slower than the program it receives from)",
    )
    args = parser.parse_args()
    global MONITOR_NICE
    MONITOR_NICE = args.monitor_nice
    print(
        f"UDP from a real program: {WORKLOAD.name} {args.tasks} tasks, monitor "
        f"{'printing every line to a file' if args.print else '--quiet'}"
        f"{f' under nice -n {args.monitor_nice}' if args.monitor_nice else ''}, {args.python}; "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs",
        flush=True,
    )
    kinds = ["acks", "no-acks"] if args.peer else ["acks"]
    clean = dict.fromkeys(kinds, 0)
    with tempfile.TemporaryDirectory(prefix="profkit-udp-") as tmp:
        for i in range(args.runs):
            for kind in kinds:  # interleaved: both see the same load
                r = one_run(args.python, args.tasks, not args.print, kind == "acks", Path(tmp))
                rate = r["expected_lines"] / r["program"]
                print(
                    f"run {i + 1} {kind:7}: {r['expected_lines']:.0f} lines, program "
                    f"{r['program']:.2f} s ({rate:,.0f} lines/s), whole run {r['elapsed']:.2f} s; "
                    f"sent {r['sent']} datagrams, dropped at sender {r['sender_dropped']} lines "
                    f"(monitor saw {r['dropped_seen']}); received {r['received']} datagrams, "
                    f"{r['lines']} lines; lost {r['lost']} datagrams = {r['lines_lost']} lines "
                    f"(monitor's count {r['monitor_lost']}, kernel drops {r['kernel_drops']})",
                    flush=True,
                )
                clean[kind] += r["lost"] == 0 and r["lines_lost"] == 0
    for kind in kinds:
        print(f"{kind:7}: {clean[kind]} of {args.runs} runs without loss")
    print(f"load average now {os.getloadavg()[0]:.1f} (goal: every run without loss, with acks)")


if __name__ == "__main__":
    main()
