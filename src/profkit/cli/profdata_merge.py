"""`profkit profdata merge` and `overlap`: placeholder until their owner replaces this file.

:mod:`profkit.cli.profdata` calls :func:`register` to add these two subcommands.
"""

from __future__ import annotations

import argparse
from typing import Any

from profkit.errors import UsageError


def register(sub: Any) -> None:
    """Add ``merge`` and ``overlap`` to the ``profkit profdata`` subparsers."""
    for name in ("merge", "overlap"):
        parser = sub.add_parser(name, help=f"{name} profiles (not implemented yet)")
        parser.add_argument("rest", nargs=argparse.REMAINDER)
        parser.set_defaults(handler=_not_yet)


def _not_yet(args: argparse.Namespace) -> int:
    raise UsageError("not implemented yet")
