"""Fixtures for the .NET sampling tests: a host, mono's C# compiler, a compiled program,
and running it (``dotnet Sampled.dll MODE ...``) until it says ``ready``.

The program (``programs/Sampled.cs``) is compiled once per session into a temporary
directory (never committed), with the ``*.runtimeconfig.json`` CoreCLR 3.1 needs. Tests
that need a runtime skip, saying why, when ``mcs`` or a host is missing (CI installs both).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from profkit.clr.host import find_host
from profkit.errors import UsageError

PROGRAMS = Path(__file__).parent / "programs"
RUNTIMECONFIG = {
    "runtimeOptions": {
        "framework": {"name": "Microsoft.NETCore.App", "version": "3.1.0"},
        "configProperties": {"System.Globalization.Invariant": True},
    }
}


@pytest.fixture(scope="session")
def dotnet() -> str:
    try:
        return find_host(None, {k: v for k, v in os.environ.items() if k != "PROFKIT_DOTNET"}).path
    except UsageError as exc:
        pytest.skip(f"no .NET runtime: {exc}")


@pytest.fixture(scope="session")
def sampled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The compiled ``Sampled.dll``."""
    mcs = shutil.which("mcs")
    if mcs is None:
        pytest.skip("mono's C# compiler (mcs) is not installed (apt-get install mono-mcs)")
    out = tmp_path_factory.mktemp("dotnet-programs")
    target = out / "Sampled.dll"
    proc = subprocess.run(
        [mcs, "-nologo", "-optimize+", f"-out:{target}", str(PROGRAMS / "Sampled.cs")],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise AssertionError(f"mcs failed:\n{proc.stdout}{proc.stderr}")
    (out / "Sampled.runtimeconfig.json").write_text(json.dumps(RUNTIMECONFIG))
    return target


Start = Callable[..., "subprocess.Popen[str]"]


@pytest.fixture
def start(dotnet: str, sampled: Path) -> Iterator[Start]:
    """``start("spin", "30")`` -> the running program, once it printed ``ready``; killed
    at the end of the test if still running."""
    procs: list[subprocess.Popen[str]] = []

    def run(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [dotnet, str(sampled), *args],
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, **(env or {})},
        )
        procs.append(proc)
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.strip() == "ready", line
        return proc

    yield run
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def profkit(
    *args: str, cwd: str | None = None, timeout: float = 240
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "profkit", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=timeout,
    )
