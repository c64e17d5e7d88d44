"""What an atomic output costs in a crowded directory, against a plain ``open().write()``.

``profkit._atomic`` writes every output through a temp file renamed over the target. Finding
a killed writer's temp file used to list the whole directory on every write; now the
target's fixed temp name, locked while written, says it. This times ``write_atomic``, a
plain (non-atomic) write of the same small output and one filtered listing of the directory
(what every write used to add), in the same run, in an empty directory and in one holding
``--files`` others, and prints write_atomic's ratio to each.

    python bench/atomic_bench.py                 # 100,000 files
    python bench/atomic_bench.py --files 10000
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable

from profkit._atomic import write_atomic


def _best_ms(write: Callable[[str, bytes], None], path: str, repeat: int) -> float:
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(repeat):
            write(path, b"{}")
        best = min(best, (time.perf_counter() - start) / repeat * 1000)
    return best


def _plain(path: str, data: bytes) -> None:
    with open(path, "wb") as fh:
        fh.write(data)


def _listing(path: str, data: bytes) -> None:
    prefix = "." + os.path.basename(path) + "."
    _ = [e for e in os.scandir(os.path.dirname(path)) if e.name.startswith(prefix)]


def _atomic(path: str, data: bytes) -> None:
    write_atomic(path, data, fsync=False)  # the disk's fsync is not what is measured


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=50)
    args = parser.parse_args()
    print(
        f"{'directory':>22}  {'plain write':>12}  {'listing':>12}  {'write_atomic':>12}"
        "  /plain  /listing"
    )
    for files in (0, args.files):
        with tempfile.TemporaryDirectory() as directory:
            for i in range(files):
                os.close(os.open(os.path.join(directory, f"f{i}"), os.O_CREAT | os.O_WRONLY))
            target = os.path.join(directory, "out.json")
            plain = _best_ms(_plain, target, args.repeat)
            listing = _best_ms(_listing, target, args.repeat)
            atomic = _best_ms(_atomic, target, args.repeat)
            label = f"{files:,} other files"
            print(
                f"{label:>22}  {plain:>9.3f} ms  {listing:>9.3f} ms  {atomic:>9.3f} ms"
                f"  {atomic / plain:5.2f}x  {atomic / listing:7.3f}x"
            )


if __name__ == "__main__":
    main()
