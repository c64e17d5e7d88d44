"""Benchmark: ``profkit export`` of a large saved profile to every format (issue #11 item 4).

Each export runs as its own ``python -m profkit export FILE -F NAME -o OUT`` process, as a
user runs it, timed wall-clock, with its peak memory (``ru_maxrss`` of that child). The
peer, measured in the same run and the same way: a process that only reads the same file
with the standard library (``json.load``, gunzip first for ``.gz``), the least any
exporter must do. Rows print the export's time, its ratio to the peer, peak memory and the
output's size. Target (issue #11): every format ≤ 10 s and < 1 GB on the largest profile.

Without ``--profile`` a synthetic profile is generated (``--nodes`` call-tree nodes,
branching like a test run: stacks 20-120 deep); the issue's own case is a real one::

    profkit run -o arit.json -m pytest -q -p no:cacheprovider \\
        -c /dev/null --rootdir . .../sympy/core/tests/test_arit.py
    python bench/export_bench.py --profile arit.json

A format that refuses the profile (collapsed or pprof of very deep stacks) prints its
one error line instead of numbers.

Issue #25 item 15 (big profiles): ``profkit report`` (tree and flat) is measured the same
way, collapsed a second time with ``--min-share 0.01`` (stacks under 0.01% folded into
their callers), and where ``flamegraph.pl`` is on the PATH (or ``--flamegraph``) it renders
both collapsed files, the peer a user runs next.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

from profkit.calltree import file
from profkit.calltree.model import CallNode, CallProfile, Frame, ThreadTree
from profkit.export.registry import EXPORTS

_PEER = """
import gzip, json, sys
path = sys.argv[1]
with open(path, "rb") as fh:
    raw = fh.read()
if raw[:2] == b"\\x1f\\x8b":
    raw = gzip.decompress(raw)
json.loads(raw)
"""


def synthetic(nodes: int, seed: int = 1) -> CallProfile:
    """A tree of about ``nodes`` nodes: a deep spine with bushy subtrees (test-run-like)."""
    rnd = random.Random(seed)
    profile = CallProfile(
        "trace",
        [Frame(f"pkg{i % 97}.mod{i % 13}.f{i}", f"/src/m{i % 13}.py", i) for i in range(6000)],
    )
    root = CallNode(-1)
    count = 0
    stack: list[tuple[CallNode, int]] = [(root, 0)]
    while stack and count < nodes:
        node, depth = stack.pop()
        fanout = rnd.choice((1, 1, 2, 3, 5)) if depth < 120 else 0
        for _ in range(fanout):
            child = node.child(rnd.randrange(len(profile.frames)))
            t = rnd.randrange(1, 10_000)
            child.add_call(t, t)
            count += 1
            stack.append((child, depth + 1))
    profile.threads.append(ThreadTree(1, "MainThread", root))
    # make inclusive times consistent bottom-up (post-order without recursion)
    order: list[CallNode] = []
    todo = [root]
    while todo:
        n = todo.pop()
        order.append(n)
        todo.extend(n.children.values())
    for n in reversed(order):
        n.inclusive_ns = n.exclusive_ns + sum(c.inclusive_ns for c in n.children.values())
    return profile


def timed(argv: list[str]) -> tuple[float, int, str]:
    """Wall seconds, peak RSS in MB of the child, and its last stderr line."""
    code = (
        "import resource, runpy, sys\n"
        "sys.argv = sys.argv[1:]\n"
        "try:\n"
        "    if sys.argv[0].endswith('.py'):\n"
        "        runpy.run_path(sys.argv[0], run_name='__main__')\n"
        "    else:\n"
        "        runpy.run_module(sys.argv[0], run_name='__main__', alter_sys=True)\n"
        "finally:\n"
        "    print('MAXRSS', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)\n"
    )
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True)
    wall = time.perf_counter() - start
    rss = 0
    lines = []
    for line in done.stderr.splitlines():
        if line.startswith("MAXRSS "):
            rss = int(line.split()[1]) // 1024
        else:
            lines.append(line)
    error = lines[-1] if done.returncode and lines else ""
    return wall, rss, error


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--profile", help="a saved profile (default: a synthetic one)")
    ap.add_argument("--nodes", type=int, default=750_000, help="synthetic profile size")
    ap.add_argument("--flamegraph", help="flamegraph.pl (default: the one on the PATH, if any)")
    args = ap.parse_args()
    flamegraph = args.flamegraph or shutil.which("flamegraph.pl")
    with tempfile.TemporaryDirectory(prefix="export-bench-") as work:
        path = args.profile
        if path is None:
            path = os.path.join(work, "synthetic.json")
            file.save(synthetic(args.nodes), path)
        size = os.path.getsize(path)
        peer_path = os.path.join(work, "peer.py")
        with open(peer_path, "w") as fh:
            fh.write(_PEER)
        peer, peer_rss, _ = timed([peer_path, path])
        print(f"profile: {path} ({size / 1e6:.1f} MB)")
        print(f"peer (json.load of the same file): {peer:.2f} s, {peer_rss} MB")
        print(f"{'command':<24} {'wall':>8} {'ratio':>6} {'peak':>8} {'output':>10}")
        rows: list[tuple[str, list[str], str]] = [
            ("report", ["report", path], ""),
            ("report --view flat", ["report", path, "--view", "flat"], ""),
        ]
        for fmt in EXPORTS:
            out = os.path.join(work, "out" + fmt.extension)
            rows.append((fmt.name, ["export", path, "-F", fmt.name, "-o", out], out))
        small = os.path.join(work, "small.collapsed")
        rows.append(
            (
                "collapsed --min-share .01",
                ["export", path, "-F", "collapsed", "--min-share", "0.01", "-o", small],
                small,
            )
        )
        for name, argv, out in rows:
            wall, rss, error = timed(["profkit", *argv])
            if error:
                print(f"{name:<24} {error}")
                continue
            out_size = os.path.getsize(out) if out else 0
            print(
                f"{name:<24} {wall:>7.2f}s {wall / peer:>6.2f} {rss:>6} MB {out_size / 1e6:>7.1f} MB"
            )
            if name.startswith("collapsed") and flamegraph:
                _flamegraph(flamegraph, out)
            if out and os.path.exists(out):
                os.unlink(out)


def _flamegraph(flamegraph: str, collapsed: str) -> None:
    """flamegraph.pl's time and peak memory on a collapsed file (the SVG is discarded)."""
    start = time.perf_counter()
    with open(collapsed, "rb") as fh:
        proc = subprocess.Popen([flamegraph], stdin=fh, stdout=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    print(
        f"{'  flamegraph.pl of it':<24} {wall:>7.2f}s {'':>6} {usage.ru_maxrss // 1024:>6} MB"
        f"  (exit {os.waitstatus_to_exitcode(status)})"
    )


if __name__ == "__main__":
    main()
