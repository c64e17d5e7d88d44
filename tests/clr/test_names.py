"""Names longer than the profiler's first buffers (issue 22, item 15).

The profiler read names into 512 UTF-16 units: a type name of 600 characters came out cut
at 511 and a method name of 600 came out empty. Now a name is read whole, and one longer
than the kept maximum (4,095 bytes) is cut on a character boundary and ends in "…".
``Failures.cs names`` emits such types and methods (C# itself stops at 512) and prints
their full names as reflection spells them.
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
