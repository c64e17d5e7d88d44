"""`profkit export`: convert a saved profile to another tool's format (see the registry)."""

from __future__ import annotations

import argparse
import functools
import io
import sys
from collections.abc import Callable
from typing import Any, BinaryIO, cast

from profkit._atomic import AtomicOutput, ensure_not_an_input, write_errors, write_stdout
from profkit._output import stdout_file
from profkit._text import escape
from profkit.calltree.model import CallProfile
from profkit.cli.report import add_metric_argument, gc_paused, load_all
from profkit.errors import UsageError
from profkit.export import registry


def register(sub: Any, name: str, help_text: str) -> None:
    """Add the `export` parser to the ``profkit`` subparsers."""
    parser = sub.add_parser(
        name,
        help=help_text,
        description=help_text + ". Several files are combined first.",
        epilog="formats:\n" + registry.help_text(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("files", nargs="+", metavar="FILE", help="profile saved by 'profkit run'")
    parser.add_argument(
        "--format",
        "-F",
        required=True,
        choices=registry.names(),
        metavar="NAME",
        help="output format: " + ", ".join(registry.names()),
    )
    parser.add_argument(
        "-o",
        "--output",
        metavar="OUT",
        help="output file ('-' for stdout; default: the input's name with the format's extension)",
    )
    add_metric_argument(parser)
    parser.add_argument(
        "--lines",
        action="store_true",
        help="collapsed: frames as 'name (file:line)', as py-spy writes them (the other "
        "formats carry file and line wherever they have a place for them)",
    )
    parser.set_defaults(handler=_handler)


def _handler(args: argparse.Namespace) -> int:
    fmt = registry.get(args.format)
    if args.output == "":
        raise UsageError("-o needs a file name ('-' for stdout)")
    if not args.output and args.files[0] == "-":
        raise UsageError("reading the profile from stdin: name the output with -o (or -o -)")
    out = args.output or registry.default_output(args.files[0], fmt)
    ensure_not_an_input(out, args.files)
    if out == "-" and fmt.binary and sys.stdout.isatty():
        raise UsageError(
            f"{fmt.name} output is binary: refusing to write it to a terminal "
            "(use -o FILE or a pipe)"
        )
    write = _writer(fmt, args.lines)
    with gc_paused():
        profile = load_all(args.files, args.metric)
        if out == "-":
            stdout = stdout_file()
            if stdout is None:  # an in-memory stdout (tests): collect, then write
                buffer = io.BytesIO()
                write(profile, buffer)
                write_stdout(buffer.getvalue())
                return 0
            with write_errors("cannot write to stdout: "), stdout:
                write(profile, cast(BinaryIO, stdout))
            return 0
        with write_errors(f"cannot write {out}: "), AtomicOutput(out) as fh:
            write(profile, fh)
    print(f"profkit: wrote {escape(out)} ({fmt.description})", file=sys.stderr)
    note = registry.bytes_note(fmt, profile)
    if note:
        print(f"profkit: note: {note}", file=sys.stderr)
    return 0


def _writer(fmt: registry.ExportFormat, lines: bool) -> Callable[[CallProfile, BinaryIO], None]:
    """The format's streaming writer; ``--lines`` only where a frame's text can carry the
    line as an option (collapsed: viewers merge frames by text, so it is not the default)."""
    if not lines:
        return fmt.stream_writer
    if fmt.name != "collapsed":
        raise UsageError(
            f"--lines applies to -F collapsed ({fmt.name} carries file and line where "
            "the format has a place for them)"
        )
    from profkit.export import collapsed

    return functools.partial(collapsed.write_to, lines=True)
