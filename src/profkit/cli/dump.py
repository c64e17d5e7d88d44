"""`profkit dump PID`: print every thread's Python stack of a running process, now."""

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
    from profkit.sampler import dump, format_dump

    pid = parse_pid(args.pid)
    write_stdout(format_dump(pid, dump(pid)).encode("utf-8", "surrogateescape"))
    return 0
