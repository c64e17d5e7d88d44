"""``profkit report --lines`` against py-spy's line view, both sampling one process at once.

Not a test (shares on a loaded 2-core machine are not something to assert). A real program
(``python -m json.tool`` on a generated JSON file of ``--mib`` MiB, written to /dev/null)
starts and waits; ``profkit attach PID --mode active`` and ``py-spy record --pid PID
--format raw`` (whose frames are ``name (file:line)`` with the line the frame was on)
attach at the same ``--rate``, then the program runs to its end under both. Printed: the hottest lines by profkit with their
share of profkit's samples, py-spy's share of the same ``file:line`` (leaf frames, files
compared by base name, as py-spy shortens them), and the largest difference.

    python bench/lines_truth.py                    # 20 MiB, 100 Hz
    python bench/lines_truth.py --rate 250 --top 15
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from profkit.calltree.file import load  # noqa: E402
from profkit.report.lines import line_rows  # noqa: E402

_FRAME = re.compile(r"^(?P<name>.*) \((?P<file>[^():]*):(?P<line>\d+)\)$")


def make_input(path: Path, mib: int) -> None:
    rng = random.Random(8)
    rows = []
    size = 0
    while size < mib << 20:
        row = {"id": len(rows), "v": [rng.random() for _ in range(8)], "s": "x" * rng.randrange(40)}
        rows.append(row)
        size += 200
    path.write_text(json.dumps(rows))


def pyspy_shares(raw: str) -> tuple[dict[tuple[str, int], int], int]:
    """Leaf-line sample counts from py-spy's raw (collapsed) output, and the total."""
    counts: dict[tuple[str, int], int] = {}
    total = 0
    for text in raw.splitlines():
        stack, _, n = text.rpartition(" ")
        if not n.isdigit():
            continue
        total += int(n)
        match = _FRAME.match(stack.split(";")[-1])
        if match:
            key = (os.path.basename(match["file"]), int(match["line"]))
            counts[key] = counts.get(key, 0) + int(n)
    return counts, total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=20)
    parser.add_argument("--settle", type=float, default=3.0, help="seconds to let both attach")
    parser.add_argument("--rate", type=int, default=100)
    parser.add_argument("--top", type=int, default=10)
    args = parser.parse_args()
    pyspy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    profkit = str(Path(sys.executable).with_name("profkit"))
    with tempfile.TemporaryDirectory() as tmp:
        data, out = Path(tmp) / "big.json", Path(tmp) / "p.json"
        make_input(data, args.mib)
        # The program waits for a line on stdin before it starts, so both samplers see
        # its whole run (json.tool has phases: windows that start apart would see
        # different mixes). Both count running threads only (py-spy's default; profkit's
        # --mode active), so the wait itself is in neither.
        code = (
            "import runpy, sys; sys.stdin.readline(); "
            f"sys.argv = ['json.tool', {str(data)!r}, {os.devnull!r}]; "
            "runpy.run_module('json.tool', run_name='__main__')"
        )
        target = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE)
        time.sleep(0.5)
        rate = str(args.rate)
        ours = subprocess.Popen(
            [profkit, "attach", str(target.pid), "-r", rate, "--mode", "active", "-o", str(out)],
            stderr=subprocess.DEVNULL,
        )
        spy_file = Path(tmp) / "spy.txt"
        theirs = subprocess.Popen(
            [
                pyspy,
                "record",
                "--pid",
                str(target.pid),
                "-r",
                rate,
                "-f",
                "raw",
                "-o",
                str(spy_file),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        time.sleep(args.settle)  # both attached (profkit's start-up is the slower)
        assert target.stdin is not None
        target.stdin.write(b"go\n")
        target.stdin.close()
        target.wait()
        _, spy_err = theirs.communicate()
        ours.wait()
        rows, total = line_rows(load(out), str(out))
        spy_text = spy_file.read_text() if spy_file.exists() else ""
        spy, spy_total = pyspy_shares(spy_text)
    rows.sort(key=lambda r: -r.samples)
    print(f"profkit: {total} samples; py-spy {spy_total} samples (py-spy rc {theirs.returncode})")
    if theirs.returncode:
        print(spy_err.decode(errors="replace")[-500:])
    print(f"{'profkit %':>9} {'py-spy %':>9}  line")
    worst = 0.0
    for r in rows[: args.top]:
        mine = 100 * r.samples / (total or 1)
        other = 100 * spy.get((os.path.basename(r.file), r.line), 0) / (spy_total or 1)
        worst = max(worst, abs(mine - other))
        print(f"{mine:>8.1f}% {other:>8.1f}%  {os.path.basename(r.file)}:{r.line} ({r.name})")
    print(f"largest difference over the top {args.top}: {worst:.1f} percentage points")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
