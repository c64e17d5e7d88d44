"""End to end: ``profkit run`` records the same call trees with the C recorder as without.

Whole processes on the real collector (``sys.monitoring`` on 3.12+, where the recorder's
methods are registered as the interpreter's callbacks; ``sys.setprofile`` on 3.11): the
program's output and exit status are unchanged, and call counts per call-tree path are
identical with ``PROFKIT_NATIVE=on`` and ``off``. Times differ run to run, so only the
structure and counts are compared, plus inclusive ≥ exclusive ≥ 0 everywhere.

Only the program's own calls are compared (paths projected onto ``__main__`` frames): how
often the standard library's threading and asyncio internals run depends on scheduling
(``Thread.start`` waits on an event only if the thread has not set it yet, ``join`` polls
its lock), so their counts differ between any two runs under load, bare or profiled.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from profkit.calltree.file import load
from profkit.calltree.model import CallNode, CallProfile
from profkit.profilers.elt import native

pytestmark = pytest.mark.skipif(not native.available(), reason="the C recorder is not built")

PROGRAM = textwrap.dedent(
    """
    import asyncio, sys, threading

    def fib(n):
        return n if n < 2 else fib(n - 1) + fib(n - 2)

    def numbers(n):
        for i in range(n):
            yield i

    def guarded():
        try:
            yield 1
            yield 2
        finally:
            pass

    def fails(depth):
        if depth == 0:
            raise ValueError("deep")
        return fails(depth - 1)

    async def tick(n):
        for _ in range(n):
            await asyncio.sleep(0)
        return n

    async def gather():
        return sum(await asyncio.gather(tick(3), tick(4)))

    def worker(out):
        out.append(fib(10))

    def main():
        print(fib(12), sum(numbers(50)))
        g = guarded(); next(g); g.close()
        g = guarded(); next(g)
        try:
            g.throw(KeyError("x"))
        except KeyError:
            pass
        for _ in range(3):
            try:
                fails(5)
            except ValueError:
                pass
        print(asyncio.run(gather()))
        out = []
        threads = [threading.Thread(target=worker, args=(out,)) for _ in range(2)]
        for t in threads: t.start()
        for t in threads: t.join()
        print(out)
        sys.exit(3)

    main()
    """
)


def _run(tmp_path: Path, mode: str) -> tuple[subprocess.CompletedProcess[str], CallProfile]:
    script = tmp_path / "prog.py"
    script.write_text(PROGRAM)
    out = tmp_path / f"{mode}.json"
    env = {**os.environ, "PROFKIT_NATIVE": mode, "PROFKIT_TREE": "0"}
    proc = subprocess.run(
        [sys.executable, "-m", "profkit", "run", "-o", str(out), str(script)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    return proc, load(out)


def _counts(profile: CallProfile) -> dict[tuple[str, ...], int]:
    """Calls per path of the program's own functions (other frames left out of the path)."""
    names = [f.name for f in profile.frames]
    counts: dict[tuple[str, ...], int] = {}
    for thread in profile.threads:
        work: list[tuple[tuple[str, ...], CallNode]] = [((), thread.root)]
        while work:
            path, node = work.pop()
            assert node.inclusive_ns >= node.exclusive_ns >= 0
            if node.frame >= 0 and names[node.frame].startswith("__main__."):
                counts[path] = counts.get(path, 0) + node.calls
            for child in node.children.values():
                name = names[child.frame]
                work.append(((*path, name) if name.startswith("__main__.") else path, child))
    return counts


def test_native_and_pure_python_record_the_same_calls(tmp_path: Path) -> None:
    fast_proc, fast = _run(tmp_path, "on")
    slow_proc, slow = _run(tmp_path, "off")
    bare = subprocess.run(
        [sys.executable, str(tmp_path / "prog.py")], capture_output=True, text=True, timeout=60
    )
    assert fast_proc.returncode == slow_proc.returncode == bare.returncode == 3
    assert fast_proc.stdout == slow_proc.stdout == bare.stdout
    assert fast.metadata["settings"]["native"] == "on"
    assert (fast.metadata["trace_engine"], slow.metadata["trace_engine"]) == ("c", "python")
    fast_counts, slow_counts = _counts(fast), _counts(slow)
    assert fast_counts == slow_counts
    assert fast_counts[("__main__.<module>", "__main__.main", "__main__.fib")] == 1
    assert len(fast.threads) == len(slow.threads) == 3
