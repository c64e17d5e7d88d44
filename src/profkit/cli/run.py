"""`profkit run`: placeholder until its issue lands; the module owner replaces this file."""

from __future__ import annotations

import argparse
from typing import Any

from profkit.errors import UsageError


def register(sub: Any, name: str, help_text: str) -> None:
    """Add the `run` parser to the ``profkit`` subparsers."""
    parser = sub.add_parser(name, help=help_text, description=help_text)
    parser.add_argument("rest", nargs=argparse.REMAINDER)
    parser.set_defaults(handler=_handler)


def _handler(args: argparse.Namespace) -> int:
    raise UsageError("'profkit run' is not implemented yet")
