"""`profkit heap run app.dll`: the .NET heap census against the real runtime (issue 24 item 2).

``programs/Census.cs`` keeps 24 MiB of byte arrays in a static field to its end (or on
a stack, after calling GC.Collect itself, through Environment.Exit, or dying of an
unhandled exception). The program's own sizes are the oracle; nothing is timed.
"""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from profkit.clr.host import Host
from tests.clr.conftest import profkit_cli

MIB = 1 << 20
TIMEOUT = 600  # a hang guard only


@pytest.fixture(scope="module")
def census_program(
    compile_program: Callable[[str], Path], dotnet_host: Host, profiler_library: str
) -> Path:
    return compile_program("Census")


def heap_run(program: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*profkit_cli(), "heap", "run", str(program), *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )


def top(report: str) -> tuple[int, str, str]:
    """(bytes, type, chain) of the report's first type."""
    lines = report.splitlines()
    first = next(
        i for i, line in enumerate(lines) if line.strip().split(" ")[0].replace(",", "").isdigit()
    )
    parts = lines[first].split()
    return int(parts[0].replace(",", "")), parts[-1], lines[first + 1].strip()


@pytest.mark.parametrize("mode", ["static", "collect"])
def test_a_static_field_holding_byte_arrays_is_named(census_program: Path, mode: str) -> None:
    proc = heap_run(census_program, mode)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "kept 96\n"  # the program's output is its own
    assert "System.Int64[]" in proc.stderr
    size, name, chain = top(proc.stderr)
    assert name == "System.Byte[]"
    assert size >= 24 * MIB
    assert chain.startswith("[static] Census.Core.Holder.Kept._items -> System.Byte[][] [")
    assert chain.endswith("-> System.Byte[]")
    assert "System.Collections.Generic.List<System.Byte[]>" not in chain  # named by its field
    assert "profkit heap: " in proc.stderr.splitlines()[0]
    # a [ThreadStatic] field, read through GetThreadStaticAddress2 for the main thread
    assert "      [static] Census.Core.Holder.PerThread\n" in proc.stderr


def test_a_stack_root_is_named_by_its_method(census_program: Path) -> None:
    proc = heap_run(census_program, "stack")
    assert proc.returncode == 0, proc.stderr
    size, name, chain = top(proc.stderr)
    assert name == "System.Byte[]" and size >= 40 * MIB
    assert chain.startswith(
        "[stack: Census.Core.Program.OnStack] System.Collections.Generic.List<System.Byte[]>._items"
    )


def test_environment_exit_keeps_its_status_and_is_counted(census_program: Path) -> None:
    proc = heap_run(census_program, "exit")
    assert proc.returncode == 3
    assert proc.stdout == "leaving through Environment.Exit\n"
    size, name, chain = top(proc.stderr)
    assert name == "System.Byte[]" and size >= 24 * MIB
    assert "Census.Core.Holder.Kept" in chain


def test_a_crash_says_why_there_is_no_census(census_program: Path, dotnet_host: Host) -> None:
    bare = subprocess.run(
        [dotnet_host.path, str(census_program), "crash"], capture_output=True, timeout=TIMEOUT
    )
    proc = heap_run(census_program, "crash")
    assert proc.returncode == bare.returncode != 0  # the runtime's abort(), as without profkit
    assert "census crash" in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("profkit heap:")]
    assert len(lines) == 1 and "no heap census" in lines[0]


def test_the_output_file_holds_the_report(census_program: Path, tmp_path: Path) -> None:
    out = tmp_path / "heap.txt"
    proc = subprocess.run(
        [*profkit_cli(), "heap", "run", "-o", str(out), str(census_program)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert top(out.read_text())[1] == "System.Byte[]"


def _terminated(argv: list[str]) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` until the program says it sleeps, then SIGTERM it (by its pid)."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline() == "sleeping\n"
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=TIMEOUT)
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def test_sigterm_ends_as_without_profkit_with_the_census(
    census_program: Path, dotnet_host: Host
) -> None:
    bare = _terminated([dotnet_host.path, str(census_program), "sleep"])
    proc = _terminated([*profkit_cli(), "heap", "run", str(census_program), "sleep"])
    assert proc.returncode == bare.returncode != 0
    # the runtime shuts down on SIGTERM (its ProcessExit runs), so the census is taken,
    # by a thread the runtime never knew (the static roots come from loaded classes)
    size, name, chain = top(proc.stderr)
    assert name == "System.Byte[]" and size >= 24 * MIB
    assert "Census.Core.Holder.Kept" in chain
