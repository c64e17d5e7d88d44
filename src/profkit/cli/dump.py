"""`profkit dump PID`: print every thread's stack of a running Python or .NET process, now."""

from __future__ import annotations

import argparse
from typing import Any

from profkit._atomic import write_stdout
from profkit.cli.attach import add_target, parse_pid


def register(sub: Any, name: str, help_text: str) -> None:
    """Add the `dump` parser to the ``profkit`` subparsers."""
    parser = sub.add_parser(
        name,
        help=help_text,
        description=help_text + " (innermost frame first; the process is not paused).",
    )
    add_target(parser)
    parser.set_defaults(handler=_handler)


def _handler(args: argparse.Namespace) -> int:
    from profkit.cli import dotnet_pid
    from profkit.sampler import dump, format_dump
    from profkit.sampler.errors import AttachError

    pid = parse_pid(args.pid)
    kind = dotnet_pid.route(pid)
    if kind == "dotnet":
        return dotnet_pid.dump(pid)
    try:
        stacks = dump(pid)
    except AttachError as exc:
        if kind == "unknown" and type(exc) is AttachError:
            raise dotnet_pid.neither(pid) from None
        raise
    write_stdout(format_dump(pid, stacks).encode("utf-8", "surrogateescape"))
    return 0
