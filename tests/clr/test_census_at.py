"""`profkit heap run --at 2s app.dll`: the census at a moment of the run, not at its end
(issue 24 item 2), against the real runtime.

``programs/CensusAt.cs`` holds 24 MiB of byte arrays in one static field until it has seen
the census's forced full GC, then 32 MiB of long arrays in another until its end: the
census taken at ``--at`` holds the first and not the second. The program itself waits for
that GC, so a slow machine delays the run, never the answer; nothing is timed.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from profkit.clr.host import Host
from tests.clr.conftest import profkit_cli
from tests.clr.test_census import MIB, TIMEOUT, top


@pytest.fixture(scope="module")
def at_program(
    compile_program: Callable[[str], Path], dotnet_host: Host, profiler_library: str
) -> Path:
    return compile_program("CensusAt")


def heap_run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*profkit_cli(), "heap", "run", *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=None if env is None else os.environ | env,
    )


def test_the_census_holds_what_the_program_held_at_that_moment(at_program: Path) -> None:
    proc = heap_run("--at", "3s", str(at_program), "3")
    assert proc.returncode == 0, proc.stderr
    if proc.stdout == "late\n":
        pytest.skip("the machine was too slow to fill the first phase within 3 s")
    assert proc.stdout == "second 4\n"  # the program went on after the census, unchanged
    assert "after a full GC forced at " in proc.stderr.splitlines()[0]
    size, name, chain = top(proc.stderr)
    assert name == "System.Byte[]" and size >= 24 * MIB
    assert chain.startswith("[static] CensusAt.Core.Phase.First._items -> System.Byte[][] [")
    # what came later is not in it: 32 MiB of long arrays would be the top type
    assert "System.Int64[]" not in proc.stderr
    assert "Phase.Second" not in proc.stderr


@pytest.mark.parametrize("server", ["0", "1"])
def test_the_census_is_the_forced_gc_s_on_either_gc(at_program: Path, server: str) -> None:
    """The census is the first full GC to start once asked for, on whatever thread the
    runtime runs it (a server GC's are its own): one walk, each object counted once."""
    proc = heap_run(
        "--at", "3s", str(at_program), "3", env={"COMPlus_gcServer": server}
    )  # fmt: skip
    if proc.stdout == "late\n":
        pytest.skip("the machine was too slow to fill the first phase within 3 s")
    assert proc.returncode == 0, proc.stderr
    size, name, chain = top(proc.stderr)
    assert name == "System.Byte[]" and 24 * MIB <= size < 25 * MIB  # counted once
    assert chain.startswith("[static] CensusAt.Core.Phase.First")


def test_a_crash_after_the_census_keeps_it_and_its_own_status(
    at_program: Path, compile_program: Callable[[str], Path], dotnet_host: Host
) -> None:
    # how the runtime ends a program on an unhandled exception (abort()), without profkit
    bare = subprocess.run(
        [dotnet_host.path, str(compile_program("Census")), "crash"],
        capture_output=True,
        timeout=TIMEOUT,
    )
    proc = heap_run("--at", "3s", str(at_program), "3", "crash")
    if proc.stdout == "late\n":
        pytest.skip("the machine was too slow to fill the first phase within 3 s")
    assert proc.stdout == "second 4\n"
    assert "census-at crash" in proc.stderr  # the runtime's own report of it
    assert proc.returncode == bare.returncode != 0
    size, name, chain = top(proc.stderr)  # the census of 3 s, taken before the crash
    assert name == "System.Byte[]" and size >= 24 * MIB
    assert chain.startswith("[static] CensusAt.Core.Phase.First")
    assert "forced at " in proc.stderr


def test_a_program_ending_first_has_the_end_census_and_says_so(at_program: Path) -> None:
    proc = heap_run("--at", "600s", str(at_program), "600", "early")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "early 96\n"
    head = proc.stderr.splitlines()[0]
    assert "at the program's end" in head and "it ended before 600 s" in head
    size, name, chain = top(proc.stderr)
    assert name == "System.Byte[]" and size >= 24 * MIB
    assert chain.startswith("[static] CensusAt.Core.Phase.First")


@pytest.mark.parametrize(
    ("at", "said"), [("5", "give a unit"), ("0s", "a time after the start"), ("x", "duration")]
)
def test_a_bad_time_is_one_line(at_program: Path, at: str, said: str) -> None:
    proc = heap_run("--at", at, str(at_program), "1")
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.startswith("profkit: error: ") and said in proc.stderr
    assert proc.stderr.count("\n") == 1


def test_at_is_for_dotnet_only(tmp_path: Path) -> None:
    script = tmp_path / "s.py"
    script.write_text("print('ran')\n")
    proc = heap_run("--at", "1s", str(script))
    assert proc.returncode == 2 and "--at is for .NET assemblies" in proc.stderr
    assert proc.stdout == ""
