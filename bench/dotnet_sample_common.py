"""Shared by the .NET sampling benches: build tests/dotnet/programs/Sampled.cs, find a host."""

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


def build() -> Path:
    """``Sampled.dll`` (rebuilt each run: a few seconds) next to its runtimeconfig."""
    mcs = shutil.which("mcs")
    if mcs is None:
        sys.exit("mcs (mono-mcs) is not installed")
    WORK.mkdir(parents=True, exist_ok=True)
    dll = WORK / "Sampled.dll"
    subprocess.run([mcs, "-nologo", "-optimize+", f"-out:{dll}", str(SOURCE)], check=True)
    (WORK / "Sampled.runtimeconfig.json").write_text(json.dumps(RUNTIMECONFIG))
    return dll


def host() -> str:
    return find_host().path


def profkit() -> list[str]:
    return [sys.executable, "-m", "profkit"]


def load_avg() -> str:
    with open("/proc/loadavg") as fh:
        return fh.read().split()[0]
