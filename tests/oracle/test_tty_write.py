"""``python -m json.tool`` printing to a terminal: ``TextIOWrapper.write`` is the hot spot.

A new user's first try is ``profkit run -m json.tool big.json``, the output on a terminal.
There ``sys.stdout`` is line buffered: every line written is a ``write`` system call, and
that is where the run's time goes (bench/ccall_truth.py --tty shows it unprofiled, with
``perf``). Issue #11 asks that the flat report say so: ``TextIOWrapper.write`` among the
top three functions by self time. The oracle for the count is cProfile on the same
program in the same test, also on a terminal: both must see the same number of
``TextIOWrapper.write`` calls. Small input (a fraction of a second), no perf needed.
"""

from __future__ import annotations

import json
import os
import pstats
import random
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from profkit.calltree.file import load
from profkit.report.flat import profile_stats

WRITE = "TextIOWrapper.write"

pytestmark = pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs a pty (os.openpty)")


def _on_a_terminal(cmd: list[str]) -> int:
    """Run ``cmd`` with its stdout on a pty that is read (and dropped) as it is written;
    the number of bytes it printed."""
    master, slave = os.openpty()
    drained = [0]

    def drain() -> None:
        while True:
            try:
                chunk = os.read(master, 1 << 16)
            except OSError:  # EIO: the program closed its end
                return
            if not chunk:
                return
            drained[0] += len(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROFKIT_")}
    try:
        subprocess.run(
            cmd, stdout=slave, stderr=subprocess.DEVNULL, env=env, check=True, timeout=120
        )
    finally:
        os.close(slave)
        reader.join(timeout=60)
        os.close(master)
    return drained[0]


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rng = random.Random(0)
    rows = [
        {"id": i, "name": f"item{i}", "tags": ["a", "b"], "value": rng.random()}
        for i in range(1500)
    ]
    path = tmp_path_factory.mktemp("tty") / "input.json"
    path.write_text(json.dumps(rows))
    return path


def test_write_is_a_top_three_hot_spot_on_a_terminal(source: Path, tmp_path: Path) -> None:
    out = tmp_path / "p.json"
    program = ["-m", "json.tool", str(source)]
    printed = _on_a_terminal(
        [sys.executable, "-m", "profkit", "run", "--no-tree", "-o", str(out), *program]
    )
    assert printed > 100_000  # the whole document went to the terminal
    stats_out = tmp_path / "c.pstats"
    _on_a_terminal([sys.executable, "-m", "cProfile", "-o", str(stats_out), *program])

    profile = load(out)
    functions = profile_stats(profile).functions
    ranked = sorted(functions.items(), key=lambda kv: -kv[1].exclusive_ns)
    names = [profile.frames[frame].name for frame, _ in ranked]
    assert WRITE in names[:3], names[:6]
    ours = ranked[names.index(WRITE)][1].calls

    raw = pstats.Stats(str(stats_out)).stats  # type: ignore[attr-defined]
    theirs = [
        row[1]
        for (file, _, name), row in raw.items()
        if file == "~" and name == "<method 'write' of '_io.TextIOWrapper' objects>"
    ]
    assert theirs == [ours]
