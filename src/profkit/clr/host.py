"""Finding the .NET host (``dotnet``) that runs a profiled assembly.

Order, first found wins: ``--dotnet PATH``, then ``PROFKIT_DOTNET``, then the runtime
inside the ``dotnetcore2`` PyPI package (a real CoreCLR 3.1), then ``dotnet`` on
``PATH``. An explicit choice that is not an executable file is an error rather than a
reason to fall through: the user asked for that host. Nothing found is one error line
naming every place looked at.

The ``dotnetcore2`` package is located with :func:`importlib.util.find_spec`, never
imported: importing it installs a logging handler on stdout, and its
``ensure_dependencies()`` downloads; profkit only needs the path of its ``bin/dotnet``.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from collections.abc import Mapping

from profkit._record import record
from profkit.errors import UsageError

DOTNET_VAR = "PROFKIT_DOTNET"


@record(frozen=True)
class Host:
    """The ``dotnet`` executable chosen, and where the choice came from."""

    path: str
    source: str  #: "--dotnet", "PROFKIT_DOTNET", "dotnetcore2" or "PATH"


def _executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def dotnetcore2_host() -> str | None:
    """``bin/dotnet`` inside an installed ``dotnetcore2`` package, without importing it."""
    try:
        spec = importlib.util.find_spec("dotnetcore2")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        candidate = os.path.join(location, "bin", "dotnet")
        if _executable(candidate):
            return candidate
    return None


def find_host(explicit: str | None = None, environ: Mapping[str, str] | None = None) -> Host:
    """The host to run, or :class:`UsageError` naming every place looked at."""
    env = os.environ if environ is None else environ
    if explicit:
        if not _executable(explicit):
            raise UsageError(f"--dotnet {explicit}: not an executable file")
        return Host(os.path.abspath(explicit), "--dotnet")
    from_env = env.get(DOTNET_VAR)
    if from_env:
        if not _executable(from_env):
            raise UsageError(f"{DOTNET_VAR}={from_env}: not an executable file")
        return Host(os.path.abspath(from_env), DOTNET_VAR)
    packaged = dotnetcore2_host()
    if packaged:
        return Host(packaged, "dotnetcore2")
    on_path = shutil.which("dotnet", path=env.get("PATH", os.defpath))
    if on_path:
        return Host(os.path.abspath(on_path), "PATH")
    raise UsageError(
        "no .NET runtime found: looked at --dotnet (not given), "
        f"{DOTNET_VAR} (not set), the dotnetcore2 package (not installed) and "
        "'dotnet' on PATH (not found); install one (pip install dotnetcore2) or pass --dotnet PATH"
    )
