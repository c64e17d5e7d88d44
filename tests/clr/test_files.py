"""The files the CLR side opens: planted links, FIFOs (issue 22, items 8 and 9).

The library opened ``PROFKIT_STREAM`` with ``O_TRUNC`` and its result's temp file
``<out>.<pid>.tmp`` with ``fopen("w")``: both followed a link another user planted in a
shared directory (where ``fs.protected_symlinks=0``, as on this machine's kernel, the
kernel does not stop it), so the file it named was overwritten. ``clr convert FIFO`` and
``clr run FIFO`` waited forever for a writer. Now the library opens files as the Python
writers do (csrc/files.c), and the Python side reads regular files only.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from profkit.clr.environment import profiler_environment
from profkit.clr.host import Host
from profkit.settings import Settings
from tests.clr.conftest import profkit_cli

PRECIOUS = "precious: never to be overwritten\n"
OTHER_USER = 65534  # nobody


@pytest.fixture(scope="module")
def program(
    compile_program: Callable[[str], Path], dotnet_host: Host, profiler_library: str
) -> Path:
    return compile_program("Failures")


def _shared_dir(tmp_path: Path) -> Path:
    """A directory like /tmp: sticky and world-writable."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    return shared


def _plant(link: Path, target: Path) -> None:
    """A symlink to ``target`` that belongs to another user (root only can make one)."""
    link.symlink_to(target)
    os.lchown(link, OTHER_USER, OTHER_USER)


def _run(
    host: Host, program: Path, env: dict[str, str], prefix: str = ""
) -> subprocess.CompletedProcess[str]:
    """``dotnet program catch 3`` with the profiler's environment; ``prefix``: shell code run
    first in the same process (``$$`` is then the .NET process's pid: ``exec``)."""
    cmd = f"{prefix} exec {shlex.quote(host.path)} {shlex.quote(str(program))} catch 3"
    return subprocess.run(
        ["sh", "-c", cmd], env=os.environ | env, capture_output=True, text=True,
        stdin=subprocess.DEVNULL, timeout=600,
    )  # fmt: skip


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="planting another user's link needs root")


@needs_root
def test_stream_never_follows_a_planted_link(
    program: Path, dotnet_host: Host, tmp_path: Path
) -> None:
    victim = tmp_path / "victim"
    victim.write_text(PRECIOUS)
    link = _shared_dir(tmp_path) / "lines.txt"
    _plant(link, victim)
    env = profiler_environment(Settings(prefixes=("ProfRel",), stream=str(link)))
    proc = _run(dotnet_host, program, env)
    assert proc.returncode == 0 and proc.stdout.startswith("Catcher=3 ")  # runs unprofiled
    assert victim.read_text() == PRECIOUS
    (line,) = (x for x in proc.stderr.splitlines() if "profkit" in x)
    assert f"PROFKIT_STREAM={link}" in line and "runs unprofiled" in line


def test_stream_follows_ones_own_link_and_truncates_a_file(
    program: Path, dotnet_host: Host, tmp_path: Path
) -> None:
    target = tmp_path / "target.txt"
    target.write_text("old content that must go\n" * 100)
    link = tmp_path / "mine.txt"
    link.symlink_to(target)
    env = profiler_environment(Settings(prefixes=("ProfRel",), stream=str(link)))
    proc = _run(dotnet_host, program, env)
    assert proc.returncode == 0, proc.stderr
    lines = target.read_text().splitlines()
    assert lines[0] == "Enter: ProfRel.Program.Main" and "old content" not in target.read_text()
    assert link.is_symlink()


@needs_root
def test_result_temp_file_is_never_a_planted_name(
    program: Path, dotnet_host: Host, tmp_path: Path
) -> None:
    victim = tmp_path / "victim"
    victim.write_text(PRECIOUS)
    shared = _shared_dir(tmp_path)
    out = shared / "raw.txt"
    env = profiler_environment(Settings(prefixes=("ProfRel",)), output=str(out))
    # the pid is the shell's ($$), kept by exec: the link waits at <out>.<pid>.tmp
    plant = f"ln -s {shlex.quote(str(victim))} {shlex.quote(str(out))}.$$.tmp &&"
    plant += f" chown -h {OTHER_USER} {shlex.quote(str(out))}.$$.tmp &&"
    proc = _run(dotnet_host, program, env, plant)
    assert proc.returncode == 0, proc.stderr
    assert victim.read_text() == PRECIOUS
    assert not out.is_symlink() and out.read_text().startswith("profkit-clr\t1\n")


@needs_root
def test_result_path_planted_as_a_link_is_refused(
    program: Path, dotnet_host: Host, tmp_path: Path
) -> None:
    victim = tmp_path / "victim"
    victim.write_text(PRECIOUS)
    out = _shared_dir(tmp_path) / "raw.txt"
    _plant(out, victim)
    env = profiler_environment(Settings(prefixes=("ProfRel",)), output=str(out))
    proc = _run(dotnet_host, program, env)
    assert proc.returncode == 0 and proc.stdout.startswith("Catcher=3 ")
    assert victim.read_text() == PRECIOUS and out.is_symlink()
    (line,) = (x for x in proc.stderr.splitlines() if "profkit" in x)
    assert f"cannot write {out}" in line


def test_result_path_that_is_a_fifo_is_refused(
    program: Path, dotnet_host: Host, tmp_path: Path
) -> None:
    out = tmp_path / "raw.fifo"
    os.mkfifo(out)
    env = profiler_environment(Settings(prefixes=("ProfRel",)), output=str(out))
    proc = _run(dotnet_host, program, env)
    assert proc.returncode == 0 and proc.stdout.startswith("Catcher=3 ")
    (line,) = (x for x in proc.stderr.splitlines() if "profkit" in x)
    assert f"cannot write {out}: not a regular file" in line
    assert out.is_fifo() and not list(tmp_path.glob("raw.fifo.*"))  # no temp file left


@pytest.mark.parametrize(
    "command",
    [
        ("clr", "convert", "{fifo}", "-o", "{dir}/p.json"),
        ("clr", "run", "{fifo}"),
        ("run", "{fifo}"),
    ],
)
def test_a_fifo_is_refused_not_waited_on(tmp_path: Path, command: tuple[str, ...]) -> None:
    fifo = tmp_path / "app.dll"
    os.mkfifo(fifo)
    args = [part.format(fifo=fifo, dir=tmp_path) for part in command]
    proc = subprocess.run(
        [*profkit_cli(), *args], capture_output=True, text=True, timeout=120,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.returncode == 2
    assert (
        proc.stderr
        == f"profkit: error: {fifo}: is a FIFO, not {_what(args)} (profkit reads regular files)\n"
    )


def _what(args: list[str]) -> str:
    return "a profkit CLR result" if "convert" in args else "a .NET assembly"
