"""Memory mode's peak does not depend on sampling luck (issue 26, item 1).

A program holding 64 blocks of 1 MiB at its peak: with every allocation sampled at
``1 - exp(-size/mean)``, a 512 KiB mean saw 50-odd of the 64 blocks, and with a fixed seed
the reported peak was the same 10 % short on every run (memray, the oracle the issue used,
reports the 64 MiB). Blocks of at least the mean are now recorded exactly, so the peak is
at least the 64 MiB held, and their allocation site shows exactly 64 MiB in 64 samples.
The report says what its peak is, beside the OS's peak RSS.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

MIB = 1 << 20
PROGRAM = """
def hold():
    blocks = []
    for _ in range(64):
        blocks.append(bytearray(1 << 20))
    return blocks

blocks = hold()
small = [str(i) for i in range(50_000)]
del blocks
print("done")
"""


def _run(cmd: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROFKIT_")}
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=180)


def test_blocks_at_or_above_the_mean_are_counted_exactly(tmp_path: Path) -> None:
    (tmp_path / "peak.py").write_text(PROGRAM)
    out = _run(
        [sys.executable, "-m", "profkit", "run", "--mode", "memory", "-o", "m.json", "peak.py"],
        tmp_path,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout == "done\n"
    meta = json.loads((tmp_path / "m.json").read_text())["metadata"]
    assert 64 * MIB <= meta["peak_bytes"] < 80 * MIB
    assert meta["peak_rss_bytes"] >= 64 * MIB  # the OS saw the blocks too
    assert "peak: " in out.stderr and "peak RSS (OS" in out.stderr
    flat = _run([sys.executable, "-m", "profkit", "report", "--view", "flat", "m.json"], tmp_path)
    row = next(line for line in flat.stdout.splitlines() if "__main__.hold" in line)
    assert row.split()[:2] == ["64.0", "MiB"] and row.split()[5] == "64", row
    assert "blocks of 512 KiB or more exact" in flat.stdout
