"""The monitor's per-line cost: ``FunctionTable.feed`` on realistic datagram bodies.

The bodies are the lines the ELT profiler would send, Enter and Leave lines, four spaces
per depth, about 16 KB a body as on loopback, for two programs: ``plain``, a loop of plain
helpers, and ``recursive``, the same loop calling a recursive ``fib`` too (most of its
lines are fib's: the worst case for the total's recursion records). Rows, measured in
the same run:

* ``split``: ``body.split(", Duration: ")`` alone, the one C-level pass any parser of
  these lines pays: the peer every ratio is against;
* ``feed C`` / ``feed Python``: the monitor's loop (``_closes.c``, and its Python twin).

Each row prints CPU nanoseconds per line (this thread's CPU time, best of ``--repeat``: the
machine is shared) and its ratio to ``split``.
Compare a change by running this before and after it on the same machine.

    python bench/monitor_feed_bench.py [--lines 200000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from profkit.monitor import functions
from profkit.monitor.functions import DepthSums, FunctionTable
from profkit.wire import udp


def _program_lines(count: int, recursive: bool) -> list[str]:
    """Enter/Leave lines of a loop calling helpers (and a recursive fib), ``count`` or so."""
    out: list[str] = []
    clock = [0]

    def call(name: str, depth: int, body: Callable[[int], None]) -> None:
        out.append("    " * depth + f"Enter: {name}")
        start = clock[0]
        body(depth + 1)
        clock[0] += 250 + len(out) % 37
        out.append("    " * depth + f"Leave: {name}, Duration: {(clock[0] - start) / 1000:.3f} us")

    def fib(n: int) -> Callable[[int], None]:
        def run(depth: int) -> None:
            if n > 1:
                call("app.fib", depth, fib(n - 1))
                call("app.fib", depth, fib(n - 2))

        return run

    def helper(i: int) -> Callable[[int], None]:
        def run(depth: int) -> None:
            call(f"app.util.parse_{i % 5}", depth, lambda d: None)
            call("app.util.shared", depth, lambda d: None)

        return run

    def main(depth: int) -> None:
        i = 0
        while len(out) < count:
            call(f"app.step_{i % 11}", depth, helper(i))
            if recursive:
                call("app.fib", depth, fib(8))
            i += 1

    call("app.main", 0, main)
    return out


def _best(repeat: int, run: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.thread_time()
        run()
        best = min(best, time.thread_time() - start)
    return best


def main() -> None:
    """Print ns per line for each row and the ratio to ``split``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lines", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    for recursive in (False, True):
        lines = _program_lines(args.lines, recursive)
        print(f"{'recursive' if recursive else 'plain'}: ", end="")
        _measure(lines, args.repeat)


def _measure(lines: list[str], repeat: int) -> None:
    bodies = ["\n".join(chunk) for chunk in udp.batch(lines, max_datagram=16_384)]
    count = len(lines)

    def split() -> None:
        for body in bodies:
            body.split(", Duration: ")

    def feed() -> None:
        table, sums = FunctionTable(), DepthSums()
        for body in bodies:
            table.feed(body, sums)

    native = functions._native
    rows: list[tuple[str, Callable[[], None]]] = [("split", split)]
    if native is not None:
        rows.append(("feed C", feed))
    rows.append(("feed Python", feed))
    peer = 0.0
    print(f"{count} lines in {len(bodies)} bodies, best of {repeat}")
    for label, run in rows:
        functions._native = None if label == "feed Python" else native
        ns = _best(repeat, run) / count * 1e9
        peer = peer or ns
        print(f"{label:<12} {ns:8.1f} ns/line  {ns / peer:6.2f}x split")
    functions._native = native


if __name__ == "__main__":
    main()
