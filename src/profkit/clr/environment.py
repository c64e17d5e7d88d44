"""The environment that makes a .NET process load profkit's CoreCLR profiler.

The runtime reads ``CORECLR_ENABLE_PROFILING=1``, ``CORECLR_PROFILER`` (the CLSID its
class factory answers to) and ``CORECLR_PROFILER_PATH`` (the shared library), as the
article's ``run.bat`` sets them; the ``DOTNET_`` twins are set too for hosts that read
those names. The profiler itself reads its settings from ``PROFKIT_*`` variables, and the
article's own ``NAMESPACE_PREFIX`` / ``PROFILE_BASETIME`` when the ``PROFKIT_*`` ones are
unset (docs/clr.md lists them all).
"""

from __future__ import annotations

import os
from pathlib import Path

from profkit.errors import UsageError
from profkit.settings import Settings, format_address, format_duration

#: profkit's own profiler CLSID (uuid5 of https://profkit/clr/profiler); the library's
#: DllGetClassObject answers to this one only.
CLSID = "{819e7006-936b-5188-81a7-ef702afaf9c2}"
LIBRARY_NAME = "libprofkit_clr.so"

#: Event groups the native profiler knows (PROFKIT_CLR_EVENTS).
EVENT_GROUPS = ("calls", "exceptions", "threads", "loads", "gc", "jit", "args", "alloc")


def library_path() -> str:
    """The built ``libprofkit_clr.so`` (beside this module), or :class:`UsageError`."""
    path = Path(__file__).with_name(LIBRARY_NAME)
    if not path.is_file():
        raise UsageError(
            f"the CoreCLR profiler {path} is not built (it needs Linux and a C compiler; "
            "reinstall profkit with PROFKIT_REQUIRE_NATIVE=1 to see why)"
        )
    return str(path)


def parse_events(text: str) -> tuple[str, ...]:
    """``calls,gc`` -> the groups; ``all`` is every group but ``args`` and ``alloc``."""
    groups: list[str] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        if part == "all":
            groups.extend(g for g in EVENT_GROUPS if g not in ("args", "alloc"))
        elif part in EVENT_GROUPS:
            groups.append(part)
        else:
            raise UsageError(
                f"--clr-events {text!r}: unknown group {part!r} "
                f"(expected a comma-separated list of {', '.join(EVENT_GROUPS)}, all)"
            )
    return tuple(dict.fromkeys(groups))


def profiler_environment(
    settings: Settings,
    *,
    output: str | None = None,
    events: tuple[str, ...] | None = None,
    library: str | None = None,
) -> dict[str, str]:
    """Variables to add to a .NET process's environment to profile it.

    Only settings that differ from the defaults are written, so an inherited article
    variable (``NAMESPACE_PREFIX``, ``PROFILE_BASETIME``) still applies when profkit's
    own is not given. ``output`` is the raw result file the profiler writes at exit.
    """
    lib = library or library_path()
    env = {
        "CORECLR_ENABLE_PROFILING": "1",
        "CORECLR_PROFILER": CLSID,
        "CORECLR_PROFILER_PATH": lib,
        "CORECLR_PROFILER_PATH_64": lib,
        "DOTNET_ENABLE_PROFILING": "1",
        "DOTNET_PROFILER": CLSID,
        "DOTNET_PROFILER_PATH": lib,
    }
    if settings.prefixes:
        env["PROFKIT_NAMESPACE_PREFIX"] = ",".join(settings.prefixes)
    if settings.basetime_ns:
        env["PROFKIT_BASETIME"] = format_duration(settings.basetime_ns)
    if settings.udp is not None:
        env["PROFKIT_UDP"] = format_address(settings.udp)
    if settings.stream:
        stream = settings.stream
        env["PROFKIT_STREAM"] = stream if stream == "stderr" else os.path.abspath(stream)
    if settings.unit != "us":
        env["PROFKIT_UNIT"] = settings.unit
    if settings.timeline:
        env["PROFKIT_TIMELINE"] = "1"
    if events is not None:
        env["PROFKIT_CLR_EVENTS"] = ",".join(events)
    if output is not None:
        env["PROFKIT_CLR_OUTPUT"] = os.path.abspath(output)
    return env
