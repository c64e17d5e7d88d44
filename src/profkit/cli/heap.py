"""`profkit heap run SCRIPT [ARGS]`: run a Python script, then say what holds the most bytes
at its end and why each is alive (one reference chain from a root per type).

The report goes to stderr (or ``-o FILE``, written atomically), so the program's stdout is
its own; the command ends as the program did (exit status, uncaught exception, signal).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from typing import Any

from profkit.errors import UsageError


def register(sub: Any, name: str, help_text: str) -> None:
    """Add the `heap` parser to the ``profkit`` subparsers."""
    parser = sub.add_parser(name, help=help_text, description=help_text)
    actions = parser.add_subparsers(dest="heap_action", metavar="ACTION", required=True)
    run = actions.add_parser(
        "run",
        help="run a script; at its end print the top types by bytes and why each is alive",
        description="Run a Python script as python would; when it ends (its threads joined), "
        "walk the heap and print the types holding the most bytes, each with the shortest "
        "chain of references from a root (module, frame, local, or an object nothing "
        "refers to) to its largest object. Given a .NET assembly (app.dll), the same report "
        "for the .NET heap after a full GC at the runtime's shutdown, roots named as static "
        "fields, the methods holding stack roots, or handles (docs/clr.md).",
    )
    run.add_argument("--top", type=int, default=10, metavar="N", help="types to show (10)")
    run.add_argument("-o", "--output", metavar="FILE", help="write the report here, not stderr")
    run.add_argument(
        "--dotnet",
        metavar="PATH",
        help="for a .NET assembly (app.dll): the dotnet host to run (docs/clr.md)",
    )
    run.add_argument(
        "--at",
        metavar="DURATION",
        help="for a .NET assembly: take the census that long after the runtime's start "
        "(5s, 500ms), in a full GC forced then, not at the end (docs/clr.md)",
    )
    run.add_argument("script", help="the Python script, or a .NET assembly (app.dll)")
    run.add_argument("args", nargs=argparse.REMAINDER, help="the script's arguments")
    # Ctrl-C is the program's, as under `profkit run`: the report is written, then the
    # command dies of SIGINT (cli.main's sticky interrupt would refuse to write it).
    run.set_defaults(runs_program=True)
    parser.set_defaults(handler=_handler)


def _handler(args: argparse.Namespace) -> int:
    from profkit._atomic import ensure_not_an_input, write_atomic, write_errors
    from profkit.heap.why_alive import HeapSnapshot, format_report, take_snapshot, why_alive
    from profkit.runner.outcome import exit_signal, report_exception
    from profkit.runner.python import Program, hand_back

    if not 1 <= args.top <= 10_000:
        raise UsageError(f"--top must be between 1 and 10000, not {args.top}")
    if args.output:
        ensure_not_an_input(args.output, [args.script])
    from profkit.clr.assembly import looks_like_assembly_name

    if looks_like_assembly_name(args.script):
        return _dotnet(args)
    if args.dotnet or args.at:
        flag = "--dotnet" if args.dotnet else "--at"
        raise UsageError(f"{flag} is for .NET assemblies (app.dll)")
    program = Program("script", args.script, tuple(args.args))
    prepared = program.prepare()
    taken: list[HeapSnapshot] = []
    outcome = program.run(prepared, start=lambda: None, stop=lambda: taken.append(take_snapshot()))
    snapshot = taken[0] if taken else HeapSnapshot()
    text = f"profkit heap: {snapshot.stats.objects:,} objects, {snapshot.stats.bytes:,} bytes"
    if snapshot.own.objects:
        text += f" (profkit's own {snapshot.own.objects:,} objects left out)"
    text += "\n"
    text += format_report(why_alive(snapshot, args.top))
    report_exception(outcome)
    if args.output:
        with write_errors(f"cannot write {args.output}: "):
            write_atomic(args.output, text.encode("utf-8", "surrogateescape"))
    else:
        sys.stderr.write(text)
    hand_back()  # the program's __main__ outlives its exit handlers, as under python
    signum = exit_signal(outcome)
    if signum is not None:
        import signal

        from profkit.runner import signals

        if signum == signal.SIGINT:  # python runs its exit handlers before dying of SIGINT
            import atexit

            atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        signals.die_of(signum)
    if outcome.system_exit is not None:
        raise outcome.system_exit  # end like the program: its SystemExit, as it raised it
    return outcome.status


def _dotnet(args: argparse.Namespace) -> int:
    """The census of a .NET program's heap at its end; ends as the program did."""
    from profkit._atomic import write_atomic, write_errors
    from profkit.cli.heap_clr import run_report

    text, ended = run_report(
        args.script, list(args.args), args.dotnet, args.top, at_ns=_census_time(args.at)
    )
    if args.output:
        with write_errors(f"cannot write {args.output}: "):
            write_atomic(args.output, text.encode("utf-8", "surrogateescape"))
    else:
        sys.stderr.write(text)
    if ended.died_of is not None:
        from profkit.runner import signals

        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        signals.die_of(ended.died_of)
    return ended.status


def _census_time(text: str | None) -> int:
    """``--at``'s duration in ns (0: not given); a bare number is refused, not guessed."""
    if text is None:
        return 0
    from profkit.settings.parse import Invalid, parse_duration

    try:
        if text.strip().replace(".", "", 1).isdigit():
            raise Invalid("give a unit, like 5s or 500ms")
        ns = parse_duration(text)
    except Invalid as exc:
        raise UsageError(f"--at {text!r}: {exc}") from None
    if ns <= 0:
        raise UsageError(f"--at {text!r}: expected a time after the start, like 5s")
    return ns
