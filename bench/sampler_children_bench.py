"""How short a child may live and still be followed by the sampler (the CHILD_LOOK_S floor).

Not a test (issue #22, item 16: a loaded machine made the test that asserted this fail).
A Python program forks ``--children`` children one after another, each busy for
``--life`` milliseconds, and the same number of long-lived peers (``--peer`` ms, which
no look interval can miss); the sampler follows the program, and the fraction of each
kind that was followed and sampled inside its own function is printed side by side. The
peer's fraction says what the machine allowed in this run: compare the two, not runs.

    python bench/sampler_children_bench.py                 # 10 children of 50 ms vs 500 ms
    python bench/sampler_children_bench.py --life 30 --children 20
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from profkit.sampler import SamplerOptions, SamplerSession  # noqa: E402

TARGET = """
import os, sys, time
def child_{kind}(seconds):
    end = time.time() + seconds
    while time.time() < end:
        pass
    os._exit(0)
print("ready", flush=True)
sys.stdin.readline()
for _ in range({n}):
    pid = os.fork()
    if pid == 0:
        child_{kind}({seconds})
    os.waitpid(pid, 0)
    time.sleep(0.03)
"""


def followed(kind: str, n: int, seconds: float) -> int:
    """How many of ``n`` children living ``seconds`` each were sampled in their function."""
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "target.py"
        script.write_text(textwrap.dedent(TARGET.format(kind=kind, n=n, seconds=seconds)))
        proc = subprocess.Popen(
            [sys.executable, str(script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdout.readline()
        session = SamplerSession(proc.pid, SamplerOptions(duration=n * (seconds + 0.03) + 5))
        proc.stdin.write("go\n")
        proc.stdin.flush()
        try:
            session.run()
        finally:
            session.close()
            proc.wait()
        name = f"__main__.child_{kind}"
        profiles = session.profiles()
        return sum(
            1
            for pid, p in profiles.items()
            if pid != proc.pid and any(f.name == name for f in p.frames)
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--children", type=int, default=10)
    ap.add_argument("--life", type=float, default=50.0, help="short children's life, ms")
    ap.add_argument("--peer", type=float, default=500.0, help="peers' life, ms")
    args = ap.parse_args()
    short = followed("short", args.children, args.life / 1000)
    peer = followed("peer", args.children, args.peer / 1000)
    print(f"{'children':>10} {'life ms':>8} {'followed':>9}")
    print(f"{'short':>10} {args.life:8.0f} {short:>4}/{args.children:<4}")
    print(f"{'peer':>10} {args.peer:8.0f} {peer:>4}/{args.children:<4}")
    ratio = (short / peer) if peer else float("nan")
    print(f"short/peer followed: {ratio:.2f} (1.00: the floor held on this run)")


if __name__ == "__main__":
    main()
