"""``profkit clr``: profile .NET programs with profkit's CoreCLR profiler.

* ``profkit clr run [options] app.dll ARGS`` — run an assembly profiled (the same
  ``--prefix``, ``--basetime``, ``--udp``, ``--stream``, ``-o`` as ``profkit run``, plus
  ``--dotnet``, ``--perf-map`` and ``--clr-events``); the profile is saved in profkit's
  format, so ``report``, ``export`` and ``monitor`` work unchanged.
* ``profkit clr env [options]`` — print ``export`` lines that profile any .NET process
  started from that shell (the article's ``run.bat``).
* ``profkit clr convert RESULT -o FILE`` — turn a result file written by a hand-started
  process (``--raw`` of ``clr env``) into a saved profile (and a perf map).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import sys
from typing import Any

from profkit.errors import UsageError
from profkit.settings import SETTINGS, Settings

#: The ``profkit run`` settings that mean something for a .NET program.
_CLR_FIELDS = ("prefixes", "basetime_ns", "output", "udp", "stream", "unit", "tree", "timeline")


def register(sub: Any, name: str, help_text: str) -> None:
    parser = sub.add_parser(name, help=help_text, description=help_text)
    commands = parser.add_subparsers(dest="clr_command", metavar="SUBCOMMAND")
    run = commands.add_parser(
        "run",
        help="run a .NET assembly under the profiler",
        usage="profkit clr run [options] app.dll [args ...]",
    )
    _add_settings(run, with_output=True)
    _add_clr_options(run)
    run.add_argument("program", nargs=argparse.REMAINDER, help="the assembly and its arguments")
    run.set_defaults(handler=_run_handler)

    env = commands.add_parser(
        "env",
        help="print the environment that profiles .NET processes started from a shell",
        description="Print export lines (sh) that make any .NET process started afterwards "
        "load profkit's profiler, as the article's run.bat does: eval \"$(profkit clr env "
        '--prefix MyApp)"; dotnet MyApp.dll. Without --stream or --udp the '
        "Enter/Leave lines go to the process's stderr.",
    )
    _add_settings(env, with_output=False)
    env.add_argument("--clr-events", dest="clr_events", metavar="GROUPS", help=_EVENTS_HELP)
    env.add_argument(
        "--raw",
        metavar="FILE",
        help="also write the profiler's result file ({pid} = process id); "
        "profkit clr convert FILE -o profile.json turns it into a profile",
    )
    env.set_defaults(handler=_env_handler)

    convert = commands.add_parser("convert", help="turn a profiler result file into a profile")
    convert.add_argument("result", help="the result file (written through clr env --raw)")
    convert.add_argument("-o", "--output", required=True, help="profile file to write")
    convert.add_argument(
        "--perf-map", dest="perf_map", metavar="FILE", help="also write a perf map"
    )
    convert.set_defaults(handler=_convert_handler)
    parser.set_defaults(handler=lambda args: _no_subcommand(parser))


_EVENTS_HELP = (
    "what the profiler records: comma-separated calls, exceptions, threads, loads, gc, jit, "
    "args, all (default all; with --perf-map: everything but calls, so precompiled code stays)"
)


def _no_subcommand(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2


def _add_settings(parser: argparse.ArgumentParser, *, with_output: bool) -> None:
    for setting in SETTINGS:
        if setting.field not in _CLR_FIELDS or (setting.field == "output" and not with_output):
            continue
        if not with_output and setting.field == "tree":
            continue
        names = [setting.flag] + (["-o"] if setting.field == "output" else [])
        help_line = f"{setting.help_text()} [{setting.env}]"
        if isinstance(setting.default, bool):
            parser.add_argument(
                *names, dest=setting.field, action=argparse.BooleanOptionalAction, default=None,
                help=help_line,
            )  # fmt: skip
        else:
            parser.add_argument(
                *names, dest=setting.field, default=None, help=help_line,
                metavar=setting.metavar or None,
            )  # fmt: skip


def _add_clr_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dotnet",
        metavar="PATH",
        help="the dotnet host to run (default: PROFKIT_DOTNET, the dotnetcore2 package, "
        "dotnet on PATH)",
    )
    parser.add_argument(
        "--perf-map",
        dest="perf_map",
        nargs="?",
        const="/tmp/perf-{pid}.map",
        metavar="FILE",
        help="write a perf map with JIT'd and precompiled (R2R) code "
        "(default /tmp/perf-PID.map, where perf looks)",
    )
    parser.add_argument("--clr-events", dest="clr_events", metavar="GROUPS", help=_EVENTS_HELP)


def _settings(args: argparse.Namespace) -> Settings:
    flags: dict[str, str | None] = {}
    for field in _CLR_FIELDS:
        value = getattr(args, field, None)
        flags[field] = (
            None
            if value is None
            else ("1" if value is True else "0" if value is False else str(value))
        )
    return Settings.from_env(os.environ).with_flags(flags)


def _events(args: argparse.Namespace) -> tuple[str, ...] | None:
    from profkit.clr.environment import parse_events

    if args.clr_events is not None:
        return parse_events(args.clr_events)
    return perf_map_events(getattr(args, "perf_map", None))


def perf_map_events(perf_map: str | None) -> tuple[str, ...] | None:
    """The event groups for a run with ``--perf-map``: everything but calls (hooked calls
    make the runtime refuse precompiled code, so every method would be JIT'd), else the
    profiler's default (None)."""
    from profkit.clr.environment import EVENT_GROUPS

    if not perf_map:
        return None
    return tuple(g for g in EVENT_GROUPS if g not in ("calls", "args"))


def run_assembly(
    program: list[str],
    settings: Settings,
    *,
    dotnet: str | None = None,
    perf_map: str | None = None,
    events: tuple[str, ...] | None = None,
) -> int:
    """``profkit clr run app.dll`` (and ``profkit run app.dll``): the runner's session with
    the .NET engine; returns the program's exit status, or ends by its signal."""
    from profkit.clr.engine import checked_target
    from profkit.runner import session, signals
    from profkit.runner.outcome import exit_signal

    if not program:
        raise UsageError("no assembly to run (usage: profkit clr run [options] app.dll [args])")
    target = checked_target(program[0], tuple(program[1:]), dotnet, perf_map, events)
    result = session.run(target, settings, _say)
    signum = exit_signal(result.outcome)
    if signum is not None:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        signals.die_of(signum)
    return result.status


def _say(text: str) -> None:
    try:
        sys.stderr.write(text)
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def _run_handler(args: argparse.Namespace) -> int:
    program = list(args.program)
    if program and program[0] == "--":
        program = program[1:]
    return run_assembly(
        program,
        _settings(args),
        dotnet=args.dotnet,
        perf_map=args.perf_map,
        events=_events(args),
    )


def _env_handler(args: argparse.Namespace) -> int:
    from profkit._atomic import write_stdout
    from profkit.clr.environment import profiler_environment

    settings = _settings(args)
    if settings.stream is None and settings.udp is None:
        settings = settings.replace(stream="stderr")
    env = profiler_environment(settings, output=args.raw, events=_events(args))
    if args.raw is not None:  # keep {pid} for the process to resolve
        env["PROFKIT_CLR_OUTPUT"] = os.path.abspath(args.raw)
    lines = "".join(f"export {key}={shlex.quote(value)}\n" for key, value in env.items())
    write_stdout(lines.encode("utf-8", "surrogateescape"))  # checked (issue #22)
    return 0


def _convert_handler(args: argparse.Namespace) -> int:
    from profkit.calltree import file as profile_file
    from profkit.clr.convert import perf_map_entries, to_profile
    from profkit.clr.result import load_result

    result = load_result(args.result)
    profile_file.save(to_profile(result, {"source": os.path.abspath(args.result)}), args.output)
    if args.perf_map:
        from profkit.formats.perfmap.perfpid import PerfMap, save_perf_map

        save_perf_map(PerfMap.from_entries(perf_map_entries(result)), args.perf_map)
    return 0
