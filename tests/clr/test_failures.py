"""The CoreCLR profiler when programs fail: many caught exceptions, death, Ctrl-C (issue 22).

``programs/Failures.cs`` counts its own calls. The audit's reproductions, each run here:

* 100 and 20,000 caught exceptions: the unwind bookkeeping was capped at 64 entries and
  never emptied, so from the 65th exception on unwound frames were never popped (100
  exceptions: a callee at depth 6 with 96 calls instead of depth 3 with 100; 20,000: a
  chain thousands deep, 400 MB of stderr, minutes).
* an unhandled exception and a stack overflow: the profile was empty (nothing had
  completed) while profkit said "profile saved" and blamed ``--prefix``; with
  ``--stream`` the overflow's lines (16 KB each past depth 4,096) outlasted the 5 s the
  dying process waits, and nothing was saved.
* Ctrl-C: the runtime dies of SIGINT without its shutdown, so no profile was written.

No test asserts on time: the programs' own counts and depths are the oracle.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from profkit.calltree import file as profile_file
from profkit.calltree.model import CallProfile
from profkit.clr.host import Host
from tests.clr.conftest import profkit_cli

P = "ProfRel.Program."
#: A hang guard only (an idle machine needs a few seconds); never a measurement.
TIMEOUT = 600


@pytest.fixture(scope="module")
def failures(
    compile_program: Callable[[str], Path], dotnet_host: Host, profiler_library: str
) -> Path:
    return compile_program("Failures")


def counters(stdout: str) -> dict[str, int]:
    line = [x for x in stdout.splitlines() if x.startswith("Catcher=")][-1]
    return {k: int(v) for k, v in (part.split("=") for part in line.split())}


def by_depth(profile: CallProfile) -> Counter[tuple[str, int]]:
    """(method name without the namespace, depth) -> calls, over every thread."""
    out: Counter[tuple[str, int]] = Counter()
    for thread in profile.threads:
        stack = [(thread.root, 0)]
        while stack:
            node, depth = stack.pop()
            for child in node.children.values():
                name = profile.frames[child.frame].name.rpartition(".")[2]
                out[(name, depth + 1)] += child.calls
                stack.append((child, depth + 1))
    return out


def profkit_clr_run(
    tmp_path: Path, program: Path, *args: str, extra: tuple[str, ...] = ()
) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = tmp_path / "p.json"
    proc = subprocess.run(
        [*profkit_cli(), "clr", "run", "--prefix", "ProfRel", "--no-tree", "-o", str(out),
         *extra, str(program), *args],
        capture_output=True, text=True, timeout=TIMEOUT, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    return proc, out


@pytest.mark.parametrize("n", [100, 20_000])
def test_caught_exceptions_pop_every_unwound_frame(failures: Path, tmp_path: Path, n: int) -> None:
    proc, out = profkit_clr_run(tmp_path, failures, "catch", str(n))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert len(proc.stderr) < 2000  # profkit's own lines only (was 400 MB at 20,000)
    expected = counters(proc.stdout)
    assert expected["Catcher"] == n and expected["Thrower"] == 5 * n
    depths = by_depth(profile_file.load(str(out)))
    # Main -> Catcher -> Thrower(2) -> Thrower(1) -> Thrower(0) throws; Catcher catches
    assert depths[("Catcher", 2)] == n
    assert depths[("Leaf", 3)] == n  # the catch block of Catcher
    # Main -> Thrower(1) -> Thrower(0) throws; Main catches
    assert depths[("Leaf", 2)] == n
    assert depths[("Thrower", 2)] == n and depths[("Thrower", 3)] == 2 * n
    assert depths[("Thrower", 4)] == depths[("Thrower", 5)] == n
    assert depths[("Cleanup", 3)] == depths[("Cleanup", 4)] == depths[("Cleanup", 5)] == n
    assert max(depth for _, depth in depths) == 5
    assert sum(depths[(name, d)] for name, d in depths if name == "Thrower") == 5 * n


def test_exception_caught_inside_a_finally_of_another(failures: Path, tmp_path: Path) -> None:
    proc, out = profkit_clr_run(tmp_path, failures, "nested", "200")
    assert proc.returncode == 0, proc.stderr[-2000:]
    depths = by_depth(profile_file.load(str(out)))
    # Main -> Nested -> Thrower(2) ... throws; Nested's finally: Thrower(1) throws, caught
    assert depths[("Nested", 2)] == 200
    assert depths[("Leaf", 3)] == 200  # the inner catch, back in Nested
    assert depths[("Thrower", 3)] == 400 and depths[("Thrower", 4)] == 400
    assert depths[("Thrower", 5)] == 200
    assert max(depth for _, depth in depths) == 5


SINKS = ["none", "stream", "udp"]


def _sink_options(sink: str, tmp_path: Path, udp: socket.socket) -> tuple[str, ...]:
    if sink == "stream":
        return ("--stream", str(tmp_path / "lines.txt"))
    if sink == "udp":
        return ("--udp", "{}:{}".format(*udp.getsockname()))
    return ()


@pytest.fixture
def udp_sink() -> Iterator[socket.socket]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)  # receives nothing: lost lines
    sock.bind(("127.0.0.1", 0))
    yield sock
    sock.close()


@pytest.mark.parametrize("sink", SINKS)
def test_unhandled_exception_keeps_the_calls_open_at_death(
    failures: Path, tmp_path: Path, dotnet_host: Host, sink: str, udp_sink: socket.socket
) -> None:
    bare = subprocess.run(
        [dotnet_host.path, str(failures), "unhandled"], capture_output=True, text=True
    )
    extra = _sink_options(sink, tmp_path, udp_sink)
    proc, out = profkit_clr_run(tmp_path, failures, "unhandled", extra=extra)
    assert proc.returncode == bare.returncode != 0  # SIGABRT, as without profkit
    assert proc.stdout == bare.stdout
    assert "--prefix" not in proc.stderr and "profile saved" in proc.stderr
    depths = by_depth(profile_file.load(str(out)))
    # nothing returned: Main, Outer and Inner were open, closed when the process died
    assert depths[("Main", 1)] == depths[("Outer", 2)] == depths[("Inner", 3)] == 1
    assert depths[("Leaf", 4)] == 1


@pytest.mark.parametrize(
    ("mode", "sink"),
    [("overflow", "none"), ("overflow", "stream"), ("overflow-thread", "udp")],
)
def test_stack_overflow_keeps_what_was_seen(
    failures: Path, tmp_path: Path, dotnet_host: Host, mode: str, sink: str,
    udp_sink: socket.socket,
) -> None:  # fmt: skip
    bare = subprocess.run([dotnet_host.path, str(failures), mode], capture_output=True, text=True)
    proc, out = profkit_clr_run(
        tmp_path, failures, mode, extra=_sink_options(sink, tmp_path, udp_sink)
    )
    assert proc.returncode == bare.returncode != 0
    assert "Stack overflow" in proc.stderr
    assert "--prefix" not in proc.stderr and "profile saved" in proc.stderr
    profile = profile_file.load(str(out))
    depths = by_depth(profile)
    assert depths[("Main", 1)] == 1 and depths[("Leaf", 2)] == 1
    deep = sorted(d for name, d in depths if name == "Deep")
    assert len(deep) > 1000 and deep == list(range(deep[0], deep[0] + len(deep)))
    assert all(depths[("Deep", d)] == 1 for d in deep)


def _interrupt(
    cmd: list[str],
    ready: Callable[[subprocess.Popen[str]], None],
    env: dict[str, str] | None = None,
) -> tuple[int, str]:
    """Run ``cmd`` in a process group of its own and Ctrl-C it as a terminal does (SIGINT to
    the whole group) once ``ready`` returns; (exit status, stderr)."""
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
        text=True, start_new_session=True, env=env,
    )  # fmt: skip
    try:
        ready(proc)
        time.sleep(0.3)  # a few calls of Slow (20 ms each) complete
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, err


def _said_sleeping(proc: subprocess.Popen[str]) -> None:
    assert proc.stdout is not None
    assert proc.stdout.readline() == "sleeping\n"


@pytest.mark.parametrize("command", [("clr", "run"), ("run",)])
def test_ctrl_c_saves_the_profile_and_dies_of_sigint(
    failures: Path, tmp_path: Path, dotnet_host: Host, command: tuple[str, ...]
) -> None:
    bare, _ = _interrupt([dotnet_host.path, str(failures), "sleep", "100000"], _said_sleeping)
    out = tmp_path / "p.json"
    status, err = _interrupt(
        [*profkit_cli(), *command, "--prefix", "ProfRel", "--no-tree", "-o", str(out),
         str(failures), "sleep", "100000"],
        _said_sleeping,
    )  # fmt: skip
    assert status == bare == -signal.SIGINT
    assert "profile saved" in err and "wrote no result" not in err
    depths = by_depth(profile_file.load(str(out)))
    assert depths[("Main", 1)] == 1 and depths[("Leaf", 2)] == 1 and depths[("Slow", 2)] >= 1


def test_ctrl_c_through_the_environment_writes_the_result(
    failures: Path, tmp_path: Path, dotnet_host: Host
) -> None:
    """``eval "$(profkit clr env --raw FILE)"; dotnet app.dll`` and Ctrl-C, in a program that
    never touches the console (the runtime's own SIGINT handler is the only other one)."""
    from profkit.clr.convert import to_profile
    from profkit.clr.environment import profiler_environment
    from profkit.clr.result import load_result
    from profkit.settings import Settings

    raw, marker = tmp_path / "raw.txt", tmp_path / "running"
    env = os.environ | profiler_environment(Settings(prefixes=("ProfRel",)), output=str(raw))

    def running(proc: subprocess.Popen[str]) -> None:
        deadline = time.monotonic() + TIMEOUT
        while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marker.exists()

    cmd = [dotnet_host.path, str(failures), "quiet", "100000", str(marker)]
    bare, _ = _interrupt(cmd, running)
    marker.unlink()
    status, err = _interrupt(cmd, running, env)
    assert status == bare == -signal.SIGINT, err
    depths = by_depth(to_profile(load_result(str(raw))))
    assert depths[("Main", 1)] == 1 and depths[("Slow", 2)] >= 1
