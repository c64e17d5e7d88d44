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
        help_line = f"{setting.help} [{setting.env}]"
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
    from profkit.clr.environment import EVENT_GROUPS, parse_events

    if args.clr_events is not None:
        return parse_events(args.clr_events)
    if getattr(args, "perf_map", None):
        # Hooked calls make the runtime refuse precompiled code (everything is JIT'd);
        # a perf map is for sampling the program as it normally runs.
        return tuple(g for g in EVENT_GROUPS if g not in ("calls", "args"))
    return None


def run_assembly(
    program: list[str],
    settings: Settings,
    *,
    dotnet: str | None = None,
    perf_map: str | None = None,
    events: tuple[str, ...] | None = None,
) -> int:
    """``profkit run app.dll`` / ``profkit clr run app.dll``: run, save, report; returns the
    program's exit status (a command-line entry: it prints to stderr)."""
    from profkit.clr.launch import run_dotnet
    from profkit.runner import output as out

    if not program:
        raise UsageError("no assembly to run (usage: profkit clr run [options] app.dll [args])")
    assembly, *rest = program
    label = out.program_label(assembly)
    path = out.output_path(settings.output, label)
    absolute = os.path.abspath(path)
    outcome = run_dotnet(
        assembly, rest, settings=settings, dotnet=dotnet, events=events, perf_map=perf_map
    )
    for note in outcome.notes:
        _say(f"profkit: note: {note}\n")
    if outcome.profile is None:
        _say(f"profkit: error: no profile: {outcome.problem}\n")
        return outcome.status
    from profkit.calltree import file as profile_file

    try:
        profile_file.save(outcome.profile, absolute)
        saved = True
    except OSError as exc:
        _say(f"profkit: error: cannot write profile {path}: {exc.strerror or exc}\n")
        saved = False
    calls = events is None or "calls" in events
    if settings.tree and calls:
        _say(out.render(outcome.profile, sys.stderr))
    if calls and settings.prefixes and not outcome.profile.threads:
        _say(f"profkit: note: no method matched --prefix {','.join(settings.prefixes)}\n")
    if saved:
        _say(f"profkit: profile saved to {path}\n")
    if outcome.perf_map:
        _say(f"profkit: perf map saved to {outcome.perf_map}\n")
    return outcome.status


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
    from profkit.clr.environment import profiler_environment

    settings = _settings(args)
    if settings.stream is None and settings.udp is None:
        settings = settings.replace(stream="stderr")
    env = profiler_environment(settings, output=args.raw, events=_events(args))
    if args.raw is not None:  # keep {pid} for the process to resolve
        env["PROFKIT_CLR_OUTPUT"] = os.path.abspath(args.raw)
    for key, value in env.items():
        print(f"export {key}={shlex.quote(value)}")
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
