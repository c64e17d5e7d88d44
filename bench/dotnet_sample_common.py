"""Shared by the .NET benches: compile a C# program with mcs beside its runtimeconfig, find a
host. Sampling benches build tests/dotnet/programs/Sampled.cs (``build``)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from profkit.clr.host import find_host

HERE = Path(__file__).parent
WORK = HERE / "_work" / "dotnet_sample"
SOURCE = HERE.parent / "tests" / "dotnet" / "programs" / "Sampled.cs"
RUNTIMECONFIG = {
    "runtimeOptions": {
        "framework": {"name": "Microsoft.NETCore.App", "version": "3.1.0"},
        "configProperties": {"System.Globalization.Invariant": True},
    }
}


def build_cs(source: Path, work: Path) -> Path:
    """``work/<source's stem>.dll`` compiled optimised by mono's mcs (rebuilt each run: a
    few seconds) next to the runtimeconfig that runs it on CoreCLR 3.1."""
    mcs = shutil.which("mcs")
    if mcs is None:
        sys.exit("mcs (mono-mcs) is not installed")
    work.mkdir(parents=True, exist_ok=True)
    dll = work / f"{source.stem}.dll"
    subprocess.run([mcs, "-nologo", "-optimize+", f"-out:{dll}", str(source)], check=True)
    (work / f"{source.stem}.runtimeconfig.json").write_text(json.dumps(RUNTIMECONFIG))
    return dll


def build() -> Path:
    """``Sampled.dll``, the sampling benches' program."""
    return build_cs(SOURCE, WORK)


def host() -> str:
    return find_host().path


def profkit() -> list[str]:
    return [sys.executable, "-m", "profkit"]


def load_avg() -> str:
    with open("/proc/loadavg") as fh:
        return fh.read().split()[0]
