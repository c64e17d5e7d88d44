"""``profkit run``: run a Python program under the ELT profiler (trace) or the sampler.

``profkit run [options] script.py args`` / ``-m module args`` / ``-c code args`` (and
``app.dll args``: a .NET assembly, run by :mod:`profkit.clr`'s engine; docs/clr.md). The
program sees what ``python`` would give it (argv, ``__main__``, ``sys.path[0]``, stdin and
stdout untouched); profkit writes only to stderr. The profile is saved however the
program ends — normally, by an uncaught exception, ``SystemExit``, Ctrl-C or SIGTERM —
and then the program's ending is passed on: its ``SystemExit`` is re-raised, an uncaught
exception is printed by ``sys.excepthook`` with exit status 1, and Ctrl-C or SIGTERM end
``profkit run`` by that same signal (a shell sees 130 or 143, a parent -2 or -15), as they
end ``python``. Child Python processes are profiled through environment activation
(``PROFKIT_ENABLE_PROFILING``), each writing ``<output stem>.<pid>.json``.

This module only parses the command line; :mod:`profkit.runner` does the rest.
"""

from __future__ import annotations

import os
import sys
from types import SimpleNamespace

from profkit._text import escape
from profkit.errors import UsageError
from profkit.settings import SETTINGS, Settings, misspelt_variables

TYPE_CHECKING = False  # typing's, without importing typing at run time (profkit run's start-up)
if TYPE_CHECKING:
    import argparse
    from typing import Any

    from profkit.runner.python import Kind


def register(sub: Any, name: str, help_text: str) -> None:
    """Add the `run` parser to the ``profkit`` subparsers (flags come from the settings table)."""
    import argparse

    parser = sub.add_parser(
        name,
        help=help_text,
        description=help_text,
        usage="profkit run [options] (script.py | -m module | -c code) [args ...]",
        epilog="Every option has a PROFKIT_* environment variable (see docs/elt.md); "
        "flags win over the environment.",
    )
    for setting in SETTINGS:
        names = [setting.flag] + (["-o"] if setting.field == "output" else [])
        help_line = f"{setting.help_text()} [{setting.env}]"
        if isinstance(setting.default, bool):
            parser.add_argument(
                *names,
                dest=setting.field,
                action=argparse.BooleanOptionalAction,
                default=None,
                help=help_line,
            )
        else:
            parser.add_argument(
                *names,
                dest=setting.field,
                default=None,
                help=help_line,
                metavar=setting.metavar or None,
            )
    parser.add_argument(
        "-m",
        dest="as_module",
        action="store_true",
        help="run a library module as a script (like python -m)",
    )
    parser.add_argument(
        "-c",
        dest="as_code",
        action="store_true",
        help="run a program passed in as a string (like python -c)",
    )
    parser.add_argument(
        "--dotnet",
        metavar="PATH",
        help="for a .NET assembly (app.dll): the dotnet host to run (docs/clr.md)",
    )
    parser.add_argument(
        "--perf-map",
        dest="perf_map",
        nargs="?",
        const="/tmp/perf-{pid}.map",
        metavar="FILE",
        help="for a .NET assembly: write a perf map with JIT'd and precompiled code",
    )
    parser.add_argument(
        "program",
        nargs=argparse.REMAINDER,
        help="the script (or module, or code, or .NET assembly) and its arguments",
    )
    parser.set_defaults(handler=_handler)


def quick_args(argv: list[str]) -> SimpleNamespace | None:
    """What argparse would make of ``profkit run ARGV``, for the usual command lines only;
    ``None`` for anything else, which argparse then parses.

    argparse with its ``re``, ``gettext`` and ``locale``, and building ``run``'s parser of
    ~40 options, cost about a fifth of an empty run's start-up over bare python. Accepted
    here: exact option names from the settings table (``--flag VALUE``, ``--flag=VALUE``,
    ``--no-flag``), ``-o FILE``, ``-m``, ``-c``, then the program and its arguments, taken
    as they are. Left to argparse: help, abbreviations, joined short options, the .NET
    options, ``--`` anywhere, a value that is empty or begins with ``-``, no program —
    so every help text and message is argparse's own (tests/cli/test_run_quick_args.py
    holds this against argparse's result for each accepted form).
    """
    names: dict[str, tuple[str, bool | None]] = {}
    for setting in SETTINGS:
        if isinstance(setting.default, bool):
            names[setting.flag] = (setting.field, True)
            names["--no-" + setting.flag[2:]] = (setting.field, False)
        else:
            names[setting.flag] = (setting.field, None)
    names["-o"] = names["--output"]
    values: dict[str, Any] = {setting.field: None for setting in SETTINGS}
    as_module = as_code = False
    if "--" in argv:
        return None
    at = 0
    while at < len(argv) and argv[at].startswith("-"):
        arg = argv[at]
        at += 1
        if arg == "-m":
            as_module = True
            continue
        if arg == "-c":
            as_code = True
            continue
        name, equals, value = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        found = names.get(name)
        if found is None:
            return None
        field, const = found
        if const is not None:
            if equals:
                return None
            values[field] = const
            continue
        if not equals:
            if at == len(argv):
                return None
            value = argv[at]
            at += 1
        if not value or value.startswith("-"):
            return None
        values[field] = value
    if at == len(argv) or not argv[at]:
        return None
    return SimpleNamespace(
        command="run",
        **values,
        as_module=as_module,
        as_code=as_code,
        dotnet=None,
        perf_map=None,
        program=argv[at:],
        handler=_handler,
    )


def _handler(args: argparse.Namespace) -> int:
    from profkit.runner import session
    from profkit.runner.outcome import exit_signal
    from profkit.runner.python import hand_back

    program = _program(args)
    flags = {s.field: _flag_text(getattr(args, s.field)) for s in SETTINGS}
    settings = Settings.from_env(os.environ).with_flags(flags)
    for name, meant in misspelt_variables(os.environ):
        # the name comes from the environment: escaped like every name we print
        _say(
            f"profkit: note: {escape(name, 200)} is not a profkit setting (did you mean {meant}?)\n"
        )
    run = session.Run(program, settings, _say)
    running = run.start()
    ended: BaseException | None = None
    if running is not None:
        # The program's main code runs here, not deeper in the runner: every frame of ours
        # under its <module> shows in inspect.stack() and counts against its recursion
        # limit (this frame and the launcher's few remain; python has none).
        try:
            running.import_package()  # -m pkg.mod: pkg's code is the program's, recorded
            if running.code is not None:
                exec(running.code, running.globals)
            else:  # a directory or zip app
                import runpy

                runpy.run_path(running.path, run_name="__main__")
        except BaseException as exc:
            ended = exc
    result = run.finish(ended)
    hand_back()  # the program's __main__ outlives its exit handlers, as under python
    outcome = result.outcome
    signum = exit_signal(outcome)
    if signum is not None:
        _die_of(signum)
    if (
        outcome.system_exit is not None
        and not outcome.terminated
        and result.status == outcome.status  # (a lost profile turns a 0 into 2)
    ):
        raise outcome.system_exit  # end like the program: its SystemExit, as it raised it
    return result.status


def _die_of(signum: int) -> None:
    """End as python does after Ctrl-C (exit handlers, then SIGINT) or SIGTERM (at once)."""
    import signal

    from profkit.runner import signals

    if signum == signal.SIGINT:
        import atexit

        atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            pass
    signals.die_of(signum)


def _say(text: str) -> None:
    from profkit.runner.output import stderr

    stream = stderr()
    try:
        stream.write(text)
        stream.flush()
    except (OSError, ValueError, AttributeError):
        pass  # nowhere to say it; the profile is saved


def _program(args: argparse.Namespace) -> Any:
    from profkit.runner.python import Program

    rest = list(args.program)
    if rest and rest[0] == "--":
        rest = rest[1:]
    if args.as_module and args.as_code:
        raise UsageError("use either -m module or -c code, not both")
    if not rest:
        what = "module" if args.as_module else "code" if args.as_code else "script"
        raise UsageError(f"no {what} to run (usage: profkit run [options] script.py [args])")
    kind: Kind = "module" if args.as_module else "code" if args.as_code else "script"
    from profkit.engine.contract import looks_like_assembly_name

    if kind == "script" and looks_like_assembly_name(rest[0]):
        from profkit.cli.clr import perf_map_events
        from profkit.clr.engine import checked_target

        return checked_target(
            rest[0], tuple(rest[1:]), args.dotnet, args.perf_map, perf_map_events(args.perf_map)
        )
    if args.dotnet or args.perf_map:
        raise UsageError("--dotnet and --perf-map are for .NET assemblies (app.dll)")
    return Program(kind, rest[0], tuple(rest[1:]))


def _flag_text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)
