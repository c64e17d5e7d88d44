"""Memory mode on a .NET program: its estimate against the program's own counts, and its cost.

    python bench/dotnet_memory_bench.py                 # 3 rounds of each, ratio 60
    python bench/dotnet_memory_bench.py --repeat 5 --rounds 100

The C# program (tests/dotnet/programs/Allocs.cs, ``ratio N``) alternates ``Work.Big`` and
``Work.Small``, Big allocating 3 bytes for every byte of Small, and prints on stderr its own
counts: each method's bytes (``GC.GetAllocatedBytesForCurrentThread`` before and after),
the runtime's total (``GC.GetTotalAllocatedBytes``) and its process CPU time. Printed, per
profiled run: the estimated Big:Small ratio against the program's, each method's estimate
against its own count, the profile's total against the runtime's; the bounds of the peak
(``hold``: 64 MiB kept alive for a moment); then CPU time bare and
profiled (best of ``--repeat``, the program's own process CPU; profkit's own process
beside it). Nothing is asserted (a busy machine).
"""

from __future__ import annotations

import argparse
import json
import re
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from dotnet_sample_common import RUNTIMECONFIG, WORK, host, load_avg, profkit

from profkit.calltree.file import load
from profkit.calltree.model import CallProfile

SOURCE = Path(__file__).parent.parent / "tests" / "dotnet" / "programs" / "Allocs.cs"
COUNTS = re.compile(r"counts big=(\d+) small=(\d+) total=(-?\d+) cpu_ms=(\d+)")


def build() -> Path:
    dll = WORK / "Allocs.dll"
    WORK.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mcs", "-nologo", "-optimize+", f"-out:{dll}", str(SOURCE)], check=True)
    (WORK / "Allocs.runtimeconfig.json").write_text(json.dumps(RUNTIMECONFIG))
    return dll


def counts(stderr: str) -> tuple[int, int, int, int]:
    found = COUNTS.search(stderr)
    if found is None:
        sys.exit(f"no counts in the program's output:\n{stderr}")
    big, small, total, cpu = (int(g) for g in found.groups())
    return big, small, total, cpu


def inclusive(profile: CallProfile, name: str) -> int:
    """Bytes under every frame called ``name`` (outermost occurrence per path)."""
    total = 0
    for thread in profile.threads:
        pending = list(thread.root.children.values())
        while pending:
            node = pending.pop()
            if profile.frames[node.frame].name == name:
                total += node.inclusive_ns
            else:
                pending.extend(node.children.values())
    return total


def children_cpu_ms() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (usage.ru_utime + usage.ru_stime) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=60)
    args = parser.parse_args()
    dll, dotnet = build(), host()
    program = [str(dll), "ratio", str(args.rounds)]
    bare_cpu, prof_cpu, profkit_cpu = [], [], []
    print(f"load {load_avg()}; ratio {args.rounds} (Big 3x Small by construction)")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "m.json"
        for i in range(args.repeat):
            bare = subprocess.run([dotnet, *program], capture_output=True, text=True)
            bare_cpu.append(counts(bare.stderr)[3])
            before = children_cpu_ms()
            command = ["run", "--mode", "memory", "--prefix", "AllocTest", "-o", str(out)]
            run = subprocess.run([*profkit(), *command, *program], capture_output=True, text=True)
            spent = children_cpu_ms() - before
            big, small, total, cpu = counts(run.stderr)
            prof_cpu.append(cpu)
            profkit_cpu.append(spent - cpu)
            profile = load(out)
            est_big = inclusive(profile, "AllocTest.Work.Big")
            est_small = inclusive(profile, "AllocTest.Work.Small")
            meta = profile.metadata
            ratio = est_big / est_small if est_small else float("inf")
            print(
                f"run {i + 1}: ratio {ratio:.2f} (program's {big / small:.2f}); "
                f"Big {est_big / 1e6:.1f} MB vs its own {big / 1e6:.1f} MB "
                f"({100 * (est_big / big - 1):+.1f} %); Small {est_small / 1e6:.1f} vs "
                f"{small / 1e6:.1f} MB ({100 * (est_small / small - 1):+.1f} %); total "
                f"{meta['allocated_bytes'] / 1e6:.1f} MB in {meta['alloc_samples']} ticks vs "
                f"GC.GetTotalAllocatedBytes {total / 1e6:.1f} MB; "
                f"session from {meta['unseen_start_ns'] / 1e6:.0f} ms; {meta['gc']['count']} GCs"
            )
        # the peak shape: 64 MiB held for a moment among the churn
        hold = [str(dll), "hold", str(max(args.rounds // 4, 1))]
        subprocess.run(
            [*profkit(), "run", "--mode", "memory", "-o", str(out), *hold],
            capture_output=True, text=True,
        )  # fmt: skip
        gc = load(out).metadata["gc"]
        mib = {k: (gc[k] or 0) / 2**20 for k in gc if k.startswith("heap_")}
        print(
            f"64 MiB held: peak of live bytes between {mib['heap_after_full_gc_max_bytes']:.1f} "
            f"MiB (after a gen-2 GC) and {mib['heap_before_gc_max_bytes']:.1f} MiB (heap before "
            f"a GC); after any GC at most {mib['heap_after_gc_max_bytes']:.1f} MiB; "
            f"{gc['count']} GCs {gc['by_generation']}"
        )
    print(
        f"program CPU (best of {args.repeat}): bare {min(bare_cpu)} ms, memory mode "
        f"{min(prof_cpu)} ms ({min(prof_cpu) / min(bare_cpu):.2f}x); profkit's own process "
        f"{min(profkit_cpu):.0f} ms"
    )


if __name__ == "__main__":
    main()
