"""Entry point of the ``profkit`` command: one table of subcommands, one error policy.

Each subcommand lives in its own module under :mod:`profkit.cli` and exposes
``register(subparsers)``, which adds its parser and sets ``handler`` (``args -> int``).
Modules are imported only when their command runs (or for ``--help``), so
``profkit run`` does not pay for numpy or the format readers; ``profkit run``'s usual
command line is read without argparse at all (:func:`profkit.cli.run.quick_args`), and
anything else about it — help, every error — is argparse's (:mod:`profkit.cli.parser`).

Error policy (:func:`run_handler`, the one funnel): a :class:`~profkit.errors.ProfkitError`,
an :class:`OSError` (a read or write of the user's files, stdout included) or a
``MemoryError`` becomes one line on stderr, ``profkit: error: <message>`` with control
characters escaped, and exit status 2. Anything else is a bug in profkit and is reported
as one, exit status 70 (with the traceback only under ``PROFKIT_DEBUG=1``).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Iterator, Sequence

from profkit import _atomic
from profkit._text import MAX_MESSAGE_CHARS, escape
from profkit.errors import ProfkitError

TYPE_CHECKING = False  # typing's, without importing typing at run time (profkit run's start-up)
if TYPE_CHECKING:
    import argparse
    from typing import Any

# (command, module under profkit.cli, one-line help). The single list of commands:
# help text and dispatch are both derived from it.
COMMANDS: tuple[tuple[str, str, str], ...] = (
    ("run", "run", "run a Python program under a profiler (ELT call tree or sampling)"),
    ("attach", "attach", "sample a running Python or .NET process from outside, save its profile"),
    ("top", "top", "live view of a running Python or .NET process's hottest functions"),
    ("dump", "dump", "print every thread's stack of a running Python or .NET process"),
    ("monitor", "monitor", "receive and show a profiler's live UDP stream"),
    ("report", "report", "print a saved profile as a call tree, flat or callers view"),
    ("export", "export", "convert a saved profile (speedscope, Chrome trace, pstats, ...)"),
    ("profdata", "profdata", "LLVM instrumentation profiles: show, merge, overlap"),
    ("perfmap", "perfmap", "perf maps: show, lookup, convert, symbolize, verify, from-image"),
    (
        "clr",
        "clr",
        ".NET programs: run under profkit's CoreCLR profiler, print its environment, convert its results",
    ),
    ("heap", "heap", "run a script, then show what holds the most bytes and why it is alive"),
)

EXIT_USAGE = 2


def build_parser(only: str | None = None, *, others: bool = True) -> argparse.ArgumentParser:
    """The full argparse parser (:func:`profkit.cli.parser.build_parser`)."""
    from profkit.cli.parser import build_parser as build

    return build(only, others=others)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``); return the exit status."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list and args_list[0] == "run":
        from profkit.cli.run import quick_args

        quick = quick_args(args_list[1:])
        if quick is not None:  # the usual command line, read without argparse
            return run_handler(quick.handler, quick)
    command = next((a for a in args_list if not a.startswith("-")), None)
    known = {name for name, _, _ in COMMANDS}
    only = command if command in known else None
    # The command first: the top-level parser has nothing left to parse, so the other
    # commands need not exist (``profkit -h run`` still lists them all).
    parser = build_parser(only=only, others=not args_list or args_list[0] != only)
    if only == "profdata":  # llvm-profdata's one-dash spellings (-output=FILE), before argparse
        from profkit.cli import profdata_spelling

        try:
            args_list = profdata_spelling.translate(parser, args_list)
        except ProfkitError as exc:
            return _error(str(exc))
    if not args_list:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        args = parser.parse_args(args_list)
    except SystemExit as exc:
        return _exit_code(exc)
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    return run_handler(handler, args)


@contextlib.contextmanager
def _sticky_interrupt(*, enabled: bool) -> Iterator[None]:
    """Ctrl-C raises KeyboardInterrupt as always, and is also remembered, so an output is
    never published after an interrupt that Python swallowed (see profkit._atomic). Left
    alone when SIGINT is ignored (nohup) or handled by someone else, and off the main thread."""
    if not enabled or threading.current_thread() is not threading.main_thread():
        yield
        return
    import signal  # not at import: profkit run never needs it (signal.py builds enums)

    previous = signal.getsignal(signal.SIGINT)
    if previous is not signal.default_int_handler:
        yield
        return

    def on_interrupt(signum: int, frame: Any) -> None:
        _atomic.note_interrupt()
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, on_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def run_handler(handler: Any, args: Any) -> int:
    """The one funnel: run a command and turn every input/output problem into one
    escaped ``profkit: error: ...`` line and exit status 2.

    stdout is flushed here, inside the funnel, so a full disk behind ``>`` (or
    ``/dev/full``) is an error of this command rather than a loss at interpreter exit.
    """
    # run's (and heap run's) stdout and signals are the program's
    is_run = getattr(args, "command", None) == "run" or getattr(args, "runs_program", False)
    try:
        with _sticky_interrupt(enabled=not is_run):
            status = int(handler(args) or 0)
            if not is_run:
                _flush_stdout()
            if _atomic.interrupted():  # a Ctrl-C Python lost on the way: still an interrupt
                raise KeyboardInterrupt
        return status
    except ProfkitError as exc:
        return _error(str(exc), exc.exit_status)
    except BrokenPipeError:
        # `profkit ... | head`: the reader went away; that is not an error of ours.
        _silence_stdout()
        return 0
    except KeyboardInterrupt:
        print("profkit: interrupted", file=sys.stderr)
        return 130
    except SystemExit:
        raise
    except OSError as exc:  # a read or write the command did not wrap: still the user's I/O
        where = f"{exc.filename}: " if exc.filename is not None else ""
        return _error(f"{where}{exc.strerror or exc}")
    except MemoryError:
        return _error("out of memory (the input is too large for this machine)")
    except Exception as exc:  # a profkit bug: say so plainly, keep the status distinct
        if os.environ.get("PROFKIT_DEBUG") == "1":
            raise
        print(
            escape(
                f"profkit: internal error: {type(exc).__name__}: {exc} "
                "(set PROFKIT_DEBUG=1 for a traceback; please report it)",
                MAX_MESSAGE_CHARS,
            ),
            file=sys.stderr,
        )
        return 70


def _flush_stdout() -> None:
    stream = sys.stdout
    if stream is None:
        return
    try:
        stream.flush()
    except BrokenPipeError:
        raise
    except (OSError, ValueError) as exc:
        if isinstance(exc, ValueError):  # closed by the command: nothing left to flush
            return
        _silence_stdout()  # what is left in the buffer cannot be written: drop it
        raise ProfkitError(f"cannot write to stdout: {exc.strerror or exc}") from None


def _error(message: str, status: int = EXIT_USAGE) -> int:
    """One line on stderr, control characters escaped, length capped; exit status 2 (or
    the error's own, where profkit mirrors python's)."""
    with contextlib.suppress(OSError, ValueError):  # stderr gone: the status still says it
        print(f"profkit: error: {escape(message, MAX_MESSAGE_CHARS)}", file=sys.stderr)
    return status


def _exit_code(exc: SystemExit) -> int:
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return EXIT_USAGE


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def entry() -> None:
    """Console-script entry: ``sys.exit(main())``."""
    sys.exit(main())
