"""The ``profkit`` argparse parser, built from :data:`profkit.cli.main.COMMANDS`.

A module of its own so that ``profkit run``'s usual command line, which
:func:`profkit.cli.run.quick_args` reads without argparse, does not load argparse (and the
``gettext``, ``locale`` and parser building that come with it); everything else — help,
errors, every other command — is parsed here.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from profkit import __version__
from profkit.cli.main import COMMANDS


class _Parser(argparse.ArgumentParser):
    """argparse that reports usage errors as one line with exit status 2, like ours."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        raise SystemExit(f"{self.prog}: error: {message}") from None

    def _get_formatter(self) -> argparse.HelpFormatter:
        # argparse makes a formatter for every add_argument, and sizes it by importing
        # shutil (and with it bz2, lzma, fnmatch): ~4 ms of every command's start-up, for
        # help that is rarely printed. The same width rule, without the import.
        return self.formatter_class(prog=self.prog, width=_help_width())  # type: ignore[call-arg]


def _help_width() -> int:
    """``shutil.get_terminal_size().columns - 2``, as argparse computes it."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return (columns or 80) - 2


def build_parser(only: str | None = None, *, others: bool = True) -> argparse.ArgumentParser:
    """Build the full parser; with ``only``, import just that command's module.

    ``others=False`` (with ``only``) leaves the other commands out altogether: each is a
    whole ``ArgumentParser`` (its action registry, its translated group titles), about a
    third of ``profkit run``'s parsing cost, and needed only when the top-level parser
    could speak of them (its ``--help``, an unknown command).
    """
    parser = _Parser(prog="profkit", description="profkit: a profiling toolkit.")
    parser.add_argument("--version", action="version", version=f"profkit {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, module, help_text in COMMANDS:
        if only is not None and name != only:
            if others:
                sub.add_parser(name, help=help_text, add_help=False)
            continue
        mod = importlib.import_module(f"profkit.cli.{module}")
        mod.register(sub, name, help_text)
    return parser
