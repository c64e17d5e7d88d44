"""What a .NET run says: long names, and why a profile is empty (issue 22, item 15).

Names: the profiler read names into 512 UTF-16 units: a type name of 600 characters came out cut
at 511 and a method name of 600 came out empty. Now a name is read whole, and one longer
than the kept maximum (4,095 bytes) is cut on a character boundary and ends in "…".
``Failures.cs names`` emits such types and methods (C# itself stops at 512) and prints
their full names as reflection spells them.

``--perf-map`` runs without call hooks by design (they keep precompiled code from being
used), so its profile has no call tree: profkit blamed ``--prefix`` for that.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

from profkit.calltree import file as profile_file
from profkit.clr.host import Host
from tests.clr.conftest import profkit_cli

KEPT_BYTES = 4095


def test_long_names_are_whole_or_cut_cleanly(
    compile_program: Callable[[str], Path], dotnet_host: Host, profiler_library: str,
    tmp_path: Path,
) -> None:  # fmt: skip
    program = compile_program("Failures")
    out = tmp_path / "p.json"
    proc = subprocess.run(
        [*profkit_cli(), "clr", "run", "--prefix", "ProfRel", "--no-tree", "-o", str(out),
         str(program), "names"],
        capture_output=True, text=True, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    whole, too_long = (line[5:] for line in proc.stdout.splitlines() if line.startswith("Name="))
    assert len(whole) == 13 + 600 + 1 + 600 and len(too_long) > KEPT_BYTES
    names = {frame.name for frame in profile_file.load(str(out)).frames}
    assert whole in names  # 600 + 600 characters, ending in "é": all of it
    (cut,) = (n for n in names if n.startswith("ProfRel.Long.") and n != whole)
    assert cut.endswith("…") and too_long.startswith(cut[:-1])
    assert len(cut.encode()) <= KEPT_BYTES and len(cut.encode()) > KEPT_BYTES - 8


def test_perf_map_says_why_there_is_no_call_tree(
    compile_program: Callable[[str], Path], dotnet_host: Host, profiler_library: str,
    tmp_path: Path,
) -> None:  # fmt: skip
    program = compile_program("Failures")
    for command in (("clr", "run"), ("run",)):
        proc = subprocess.run(
            [*profkit_cli(), *command, "--prefix", "ProfRel", "--perf-map", str(tmp_path / "m"),
             "--no-tree", "-o", str(tmp_path / "p.json"), str(program), "catch", "1"],
            capture_output=True, text=True, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        assert "--prefix" not in proc.stderr
        assert "--perf-map runs without call hooks" in proc.stderr
        assert "no call tree" in proc.stderr and "profile saved" in proc.stderr
    events = subprocess.run(
        [*profkit_cli(), "clr", "run", "--prefix", "ProfRel", "--clr-events", "gc,loads",
         "--no-tree", "-o", str(tmp_path / "q.json"), str(program), "catch", "1"],
        capture_output=True, text=True, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert "--prefix" not in events.stderr
    assert "--clr-events gc,loads records no calls" in events.stderr
