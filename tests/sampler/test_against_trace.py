"""Known-shape programs: the sampler's shares against trace mode's own totals.

The same finite program runs twice: under ``profkit run`` (trace mode: every call timed)
and under :func:`sample_command` (sampled from outside). Trace mode's inclusive times of
the known functions are the truth the sampled shares are judged by.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from profkit.calltree.file import load
from profkit.calltree.model import CallProfile
from profkit.sampler import SamplerOptions, sample_command

SHAPES = {
    "split": """
import time
def spin(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass
def short():
    spin(0.02)
def long():
    spin(0.06)
for _ in range(8):
    short()
    long()
""",
    "threads": """
import threading, time
def spin(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass
def short():
    spin(0.2)
def long():
    spin(0.6)
a = threading.Thread(target=short)
b = threading.Thread(target=long)
a.start(); b.start(); a.join(); b.join()
""",
    "recursion": """
import sys, time
sys.setrecursionlimit(5000)
def down(n):
    if n == 0:
        return leaf()
    return down(n - 1)
def leaf():
    end = time.perf_counter() + 0.05
    while time.perf_counter() < end:
        pass
def short():
    down(300)
def long():
    down(300); down(300); down(300)
for _ in range(4):
    short()
    long()
""",
    "asyncio": """
import asyncio, time
def spin(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass
async def short():
    for _ in range(4):
        spin(0.02)
        await asyncio.sleep(0)
async def long():
    for _ in range(4):
        spin(0.06)
        await asyncio.sleep(0)
async def main():
    await asyncio.gather(short(), long())
asyncio.run(main())
""",
}


def _inclusive(profile: CallProfile, name: str) -> int:
    """Inclusive time of ``name`` (outermost occurrences only, so recursion counts once)."""
    total = 0
    for th in profile.threads:
        stack = [(th.root, False)]
        while stack:
            node, inside = stack.pop()
            hit = node.frame >= 0 and profile.frames[node.frame].name == name
            if hit and not inside:
                total += node.inclusive_ns
            stack.extend((c, inside or hit) for c in node.children.values())
    return total


def _share(p: CallProfile) -> float:
    """long's share of short + long; -1.0 when neither was seen (a sampler starved by a
    loaded machine for the whole run: seen once beside two busy loops, asyncio shape)."""
    s, lg = _inclusive(p, "__main__.short"), _inclusive(p, "__main__.long")
    return lg / (s + lg) if s + lg else -1.0


def _run_both(script) -> tuple[CallProfile, CallProfile]:
    traced = script.with_name("traced.json")
    r = subprocess.run(
        [sys.executable, "-m", "profkit", "run", "-o", str(traced), str(script)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    outcome = sample_command([sys.executable, str(script)], SamplerOptions(rate=1000))
    assert outcome.returncode == 0 and not outcome.fallback
    return load(traced), outcome.profiles[outcome.pid]


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_share_matches_trace_mode(shape, tmp_path):
    """Within 25 points of trace mode (two separate runs of the program). On a machine
    shared by many jobs either run can be starved in bursts (see ``unsampled_ns``): one
    disagreement runs both again. A margin a loaded machine cannot break (issue #22 item
    16; it was 15 points): the accuracy itself is bench/sampler_truth.py's to judge."""
    script = tmp_path / "prog.py"
    script.write_text(SHAPES[shape])
    trace, sampled = _run_both(script)
    if abs(_share(sampled) - _share(trace)) >= 0.25:
        trace, sampled = _run_both(script)
    if _share(sampled) < 0:
        pytest.skip("the sampler saw neither function twice: starved by a loaded machine")
    assert 0.4 < _share(trace) < 0.97  # the program is built for 0.75
    assert abs(_share(sampled) - _share(trace)) < 0.25, (_share(sampled), _share(trace))
    if shape == "recursion":
        depth = max(
            d
            for th in sampled.threads
            for d, n in th.root.walk()
            if n.frame >= 0 and sampled.frames[n.frame].name == "__main__.leaf"
        )
        assert depth >= 300
