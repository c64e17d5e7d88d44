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
from profkit.cli.progress import ProgressLine, add_progress_argument, progress_line
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
    parser.add_argument(
        "--min-share",
        metavar="PERCENT",
        type=float,
        default=0.0,
        help="collapsed: fold the stacks under this %% of the total time into their caller "
        "(its time is kept; default 0: every stack is written). The format repeats each "
        "stack whole on every line, so a big profile makes a big file: its size is said "
        f"before writing from {NOTE_BYTES // 10**6} MB on",
    )
    add_progress_argument(parser)
    parser.set_defaults(handler=_handler)


#: Collapsed output from this size on is announced before it is written, with what
#: ``--min-share`` :data:`SUGGESTED_SHARE` would make of it.
NOTE_BYTES = 100 * 10**6
#: A share (percent) under a pixel of a 1200-pixel flame graph: flamegraph.pl's default
#: ``--minwidth 0.1`` already leaves such frames out of its picture.
SUGGESTED_SHARE = 0.01


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
    progress = progress_line(args.progress)
    try:
        return _export(args, fmt, out, progress)
    finally:
        if progress is not None:
            progress.close()


def _export(
    args: argparse.Namespace,
    fmt: registry.ExportFormat,
    out: str,
    progress: ProgressLine | None,
) -> int:
    write = _writer(fmt, args, progress)
    with gc_paused():
        profile = load_all(args.files, args.metric, progress)
        if progress is not None:
            progress("writing " + fmt.name)
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
    if progress is not None:
        progress.close()
    print(f"profkit: wrote {escape(out)} ({fmt.description})", file=sys.stderr)
    note = registry.bytes_note(fmt, profile)
    if note:
        print(f"profkit: note: {note}", file=sys.stderr)
    return 0


def _writer(
    fmt: registry.ExportFormat, args: argparse.Namespace, progress: ProgressLine | None
) -> Callable[[CallProfile, BinaryIO], None]:
    """The format's streaming writer; ``--lines`` and ``--min-share`` only for collapsed
    (viewers merge frames by text, so lines are not the default; the other formats stay
    proportional to the profile, so they need no folding)."""
    if not 0 <= args.min_share <= 100:
        raise UsageError("--min-share must be a percentage between 0 and 100")
    if fmt.name != "collapsed":
        for flag, used in (("--lines", args.lines), ("--min-share", args.min_share)):
            if used:
                raise UsageError(
                    f"{flag} applies to -F collapsed ({fmt.name} carries file and line "
                    "where the format has a place for them, and stays proportional to "
                    "the profile)"
                )
        return fmt.stream_writer
    from profkit.export import collapsed

    def before(plan: collapsed.Plan) -> None:
        if plan.size < NOTE_BYTES:
            return
        if progress is not None:
            progress.close()
        note = (
            f"profkit: note: collapsed output will be {_size(plan.size)} in {plan.count:,} "
            "lines (the format repeats each stack whole on every line)"
        )
        if not args.min_share:
            smaller = plan.size_at(SUGGESTED_SHARE / 100)
            note += (
                f"; --min-share {SUGGESTED_SHARE:g} folds the stacks under "
                f"{SUGGESTED_SHARE:g}% of the time (under a pixel of a flame graph) into "
                f"their callers: {_size(smaller)}"
            )
        print(note, file=sys.stderr, flush=True)

    return functools.partial(
        collapsed.write_to,
        lines=args.lines,
        min_share=args.min_share / 100,
        before=before,
        progress=progress,
    )


def _size(n: int) -> str:
    if n < 10**6:
        return f"{n:,} bytes"
    return f"{n / 1e9:.1f} GB" if n >= 10**9 else f"{n / 1e6:.0f} MB"
