"""py-spy as the oracle: the same program, sampled by both at once, gives the same shares.

py-spy (PyPI) reads the interpreter from outside as profkit does, but is independent code
(Rust, its own CPython bindings). Both sample the one running target at the same time, so
load on the machine shifts both alike. Skips, saying why, where py-spy is not installed
or cannot read processes here.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from profkit.sampler import SamplerOptions, SamplerSession
from tests.sampler.conftest import GENERATOR, all_targets, interpreter


def _py_spy() -> str:
    here = Path(sys.executable).with_name("py-spy")
    found = str(here) if here.exists() else shutil.which("py-spy")
    if not found:
        pytest.skip("py-spy is not installed (pip install py-spy)")
    return found


def _leaf_shares_py_spy(raw: str) -> dict[str, float]:
    counts: dict[str, int] = {}
    total = 0
    for line in raw.splitlines():
        stack, _, n = line.rpartition(" ")
        if not n.isdigit():
            continue
        leaf = stack.split(";")[-1].split(" (")[0] if stack.strip() else "<idle>"
        counts[leaf] = counts.get(leaf, 0) + int(n)
        total += int(n)
    return {k: v / total for k, v in counts.items()} if total else {}


def _both(spy: str, pid: int, out: Path, seconds: float) -> tuple[float, float]:
    """(profkit's, py-spy's) self share of ``gen`` over the same ``seconds``."""
    proc = subprocess.Popen(
        [
            spy,
            "record",
            "--pid",
            str(pid),
            "--rate",
            "1000",
            "--duration",
            str(int(seconds)),
            "--nonblocking",
            "--format",
            "raw",
            "--output",
            str(out),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    session = SamplerSession(pid, SamplerOptions(rate=1000, duration=seconds))
    session.run()
    session.close()
    _, err = proc.communicate(timeout=60)
    if proc.returncode != 0 or not out.exists():
        pytest.skip(f"py-spy could not sample here: {err.strip()[-200:]}")
    theirs = _leaf_shares_py_spy(out.read_text()).get("gen", 0.0)
    profile = session.profiles()[pid]
    total = sum(th.root.inclusive_ns for th in profile.threads)
    ours = (
        sum(
            node.exclusive_ns
            for th in profile.threads
            for _, node in th.root.walk()
            if node.frame >= 0 and profile.frames[node.frame].name == "__main__.gen"
        )
        / total
    )
    return ours, theirs


# Session 4 saw profkit's share of gen fall to 9-15 % on an idle machine while py-spy said
# 25-36 %: a walk a yield had cut was replaced by a fresh read, a new draw taken only when
# the first saw the generator. Cut walks are now kept, their callers spliced on (_walker.c,
# splice_callers), and this test is strict again (issue #12).
@pytest.mark.parametrize("version", all_targets())
def test_generator_share_matches_py_spy(version, target, tmp_path):
    """Within 15 points. A sampling estimate on a machine shared by many jobs can stray
    (both samplers lose the CPU in bursts): one disagreement is measured again, over 2 s.
    The margin was 10 points; issue #22 item 16 asks for one a loaded machine cannot
    break (both samplers read the same instants, so what load adds is sampling noise of a
    few points). Issue #12's bias (9-15 % against py-spy's 25-36 %: 10-27 points) is mostly
    outside it; bench/sampler_bench.py prints both shares side by side for the precise
    comparison."""
    spy = _py_spy()
    t = target(GENERATOR, interpreter(version))
    ours, theirs = _both(spy, t.pid, tmp_path / "spy1.txt", 1)
    if abs(ours - theirs) >= 0.15:
        ours, theirs = _both(spy, t.pid, tmp_path / "spy2.txt", 2)
    assert abs(ours - theirs) < 0.15, f"profkit {ours:.1%} vs py-spy {theirs:.1%}"
