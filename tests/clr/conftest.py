"""Fixtures for the CLR tests: a .NET host, mono's C# compiler, and compiled programs.

The C# sources under ``programs/`` are compiled once per test session into a temporary
directory (never committed); each gets the ``*.runtimeconfig.json`` that lets CoreCLR
3.1 run it (``System.Globalization.Invariant``: 3.1 does not know Debian's ICU). Tests
that need a runtime skip, saying why, when ``mcs`` or a host is missing; CI installs
both (``.ci/run``: mono-mcs from apt, dotnetcore2 from pip).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from profkit.clr.host import Host, find_host
from profkit.errors import UsageError

PROGRAMS = Path(__file__).parent / "programs"
RUNTIMECONFIG = {
    "runtimeOptions": {
        "framework": {"name": "Microsoft.NETCore.App", "version": "3.1.0"},
        "configProperties": {"System.Globalization.Invariant": True},
    }
}


@pytest.fixture(scope="session")
def dotnet_host() -> Host:
    try:
        return find_host(None, {k: v for k, v in os.environ.items() if k != "PROFKIT_DOTNET"})
    except UsageError as exc:
        pytest.skip(f"no .NET runtime: {exc}")


@pytest.fixture(scope="session")
def profiler_library() -> str:
    from profkit.clr.environment import library_path

    try:
        return library_path()
    except UsageError as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def compile_program(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """``compile_program("Workload")`` -> the path of ``Workload.dll`` (cached per session)."""
    mcs = shutil.which("mcs")
    if mcs is None:
        pytest.skip("mono's C# compiler (mcs) is not installed (apt-get install mono-mcs)")
    out_dir = tmp_path_factory.mktemp("clr-programs")
    built: dict[str, Path] = {}

    def build(name: str) -> Path:
        if name not in built:
            target = out_dir / f"{name}.dll"
            proc = subprocess.run(
                [mcs, "-nologo", "-optimize+", f"-out:{target}", str(PROGRAMS / f"{name}.cs")],
                capture_output=True,
                text=True,
            )
            if proc.returncode != 0:
                raise AssertionError(f"mcs failed on {name}.cs:\n{proc.stdout}{proc.stderr}")
            (out_dir / f"{name}.runtimeconfig.json").write_text(json.dumps(RUNTIMECONFIG))
            built[name] = target
        return built[name]

    return build


@pytest.fixture(scope="session")
def workload(
    compile_program: Callable[[str], Path], dotnet_host: Host, profiler_library: str
) -> Path:
    return compile_program("Workload")


def profkit_cli() -> list[str]:
    return [sys.executable, "-m", "profkit"]


@pytest.fixture(scope="session")
def workload_or_stub(compile_program: Callable[[str], Path]) -> Path:
    """The compiled workload without needing a runtime (for tests that never run it)."""
    return compile_program("Workload")
