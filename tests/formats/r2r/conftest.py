"""Real ReadyToRun images for the tests: the framework of PyPI's ``dotnetcore2``.

``dotnetcore2`` (CoreCLR 3.1) ships 163 R2R framework assemblies; scripts/test installs
it. Without it (another platform, no network) these tests skip, saying so. We only take
its path: ``ensure_dependencies()`` would try to install system packages.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def runtime_dir() -> Path | None:
    """The ``shared/Microsoft.NETCore.App/<version>`` directory, or None."""
    try:
        from dotnetcore2 import runtime  # type: ignore[import-not-found]
    except ImportError:
        return None
    root = Path(runtime.get_runtime_path()).parent / "shared" / "Microsoft.NETCore.App"
    versions = sorted(root.glob("*/System.Private.CoreLib.dll"))
    return versions[-1].parent if versions else None


def dotnet_host() -> Path | None:
    try:
        from dotnetcore2 import runtime
    except ImportError:
        return None
    host = Path(runtime.get_runtime_path())
    return host if host.is_file() and os.access(host, os.X_OK) else None


@pytest.fixture(scope="session")
def framework() -> Path:
    found = runtime_dir()
    if found is None:
        pytest.skip("dotnetcore2 (CoreCLR 3.1 with R2R framework images) is not installed")
    return found
