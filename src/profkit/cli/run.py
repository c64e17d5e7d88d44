"""``profkit run``: run a Python program under the ELT profiler (trace) or the sampler.

``profkit run [options] script.py args`` / ``-m module args`` / ``-c code args``. The
program sees what ``python`` would give it (argv, ``__main__``, ``sys.path[0]``, stdin and
stdout untouched); profkit writes only to stderr. The profile is saved however the
program ends — normally, by an uncaught exception, ``SystemExit``, Ctrl-C or SIGTERM —
and then the program's ending is passed on: its ``SystemExit`` is re-raised, an uncaught
exception is printed by ``sys.excepthook`` with exit status 1, Ctrl-C gives 130 and
SIGTERM 143. Child Python processes are profiled through environment activation
(``PROFKIT_ENABLE_PROFILING``), each writing ``<output stem>.<pid>.json``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from profkit.errors import UsageError
from profkit.settings import (
    COLLECTOR_INTERVAL_VAR,
    SETTINGS,
    Settings,
    collector_interval_text,
    misspelt_variables,
)


def register(sub: Any, name: str, help_text: str) -> None:
    """Add the `run` parser to the ``profkit`` subparsers (flags come from the settings table)."""
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
        help_line = f"{setting.help} [{setting.env}]"
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
        "program",
        nargs=argparse.REMAINDER,
        help="the script (or module, or code) and its arguments",
    )
    parser.set_defaults(handler=_handler)


def _handler(args: argparse.Namespace) -> int:
    from profkit.profilers.elt import output as out
    from profkit.profilers.elt.program import report_exception

    program = _program(args)
    flags = {s.field: _flag_text(getattr(args, s.field)) for s in SETTINGS}
    settings = Settings.from_env(os.environ).with_flags(flags)
    for name, meant in misspelt_variables(os.environ):
        _say(f"profkit: note: {name} is not a profkit setting (did you mean {meant}?)\n")
    prepared = program.prepare()
    _check_sinks(settings)
    if settings.mode == "sample" and (settings.udp or settings.stream or settings.timeline):
        _say("profkit: note: --udp, --stream and --timeline record calls: trace mode only\n")
    path = out.output_path(settings.output, program.label)
    absolute = os.path.abspath(path)
    settings = settings.replace(output=path)
    profiler = _make_profiler(settings)
    if sys.argv and sys.argv[0]:  # the `profkit` console script, seen by the stack sampler
        launcher = sys.argv[0]
        profiler.internal_files |= {launcher, os.path.abspath(launcher)}
    spec = prepared.globals.get("__spec__")
    if spec is not None and spec.origin:
        profiler.main_module = (spec.origin, spec.name)  # -m: name its code after the module
    elif program.kind == "script" and prepared.code is not None:
        # A script's code is __main__'s, always: the collector's file -> module lookup
        # may name it after the file's stem or __main__ depending on when it first saw it.
        profiler.main_module = (prepared.code.co_filename, "__main__")
    parent_pid = os.getpid()
    started = time.time()

    from profkit.collect import attach, current_session, detach

    def start() -> None:
        session = current_session()
        if session is not None:
            # Started by a profiled parent: our own start-up hook attached a profiler
            # to this (profkit) process; ours replaces it. What it recorded is profkit's
            # own start-up: it must not save (or print) that as a profile.
            if hasattr(session.profiler, "standalone"):
                session.profiler.standalone = False
            detach()
        attach(
            profiler,
            sample_interval=settings.interval_ns / 1e9,
            sample_clock=settings.sample_clock,
            native=settings.native != "off",
        )
        profiler.start_events()

    # Children write next to our file: if that directory is not writable, each would
    # print its own failure; profile none of them, and say it once, at the end.
    out_dir = os.path.dirname(absolute)
    if not (os.path.isdir(out_dir) and os.access(out_dir, os.W_OK)):
        settings = settings.replace(subprocesses=False)
    with _child_environment(settings, path):
        outcome = program.run(
            prepared,
            start,
            lambda: _stop(_ours(profiler, parent_pid, current_session), detach),
            main_done=lambda: _ours(profiler, parent_pid, current_session).quiet_this_thread(),
        )
    if os.getpid() != parent_pid:
        # A forked child returning through here: its profiler saved its own file.
        return _pass_through(outcome)

    profile = profiler.profile if profiler.profile is not None else profiler.build_profile()
    if program.kind == "code":
        profile.metadata["argv"] = ["-c", *program.args]
    # First: the profile matters more than the messages. Absolute, as decided at the start,
    # in case the program changed directory.
    saved_error = _save(profile, absolute)
    report_exception(outcome)
    if settings.tree:
        _say(out.render(profile, _stderr()))
    if settings.prefixes and not any(t.root.children for t in profile.threads):
        hint = " (a script's own code is __main__)" if program.kind == "script" else ""
        _say(f"profkit: note: no function matched --prefix {','.join(settings.prefixes)}{hint}\n")
    if saved_error:
        _say(f"profkit: error: cannot write profile {path}: {saved_error}\n")
    else:
        _say(f"profkit: profile saved to {path}\n")
    children = _child_files(absolute, started)
    if children:
        shown = ", ".join(children[:3]) + (", …" if len(children) > 3 else "")
        _say(f"profkit: {len(children)} child process profile(s): {shown}\n")
    return _pass_through(outcome)


def _check_sinks(settings: Settings) -> None:
    """Refuse an unusable --udp/--stream before the program starts, not inside the profiler."""
    if settings.udp is not None:
        import socket

        host, port = settings.udp
        try:
            socket.getaddrinfo(host, port, type=socket.SOCK_DGRAM)
        except OSError as exc:
            raise UsageError(f"--udp {host}:{port}: cannot resolve {host!r}: {exc}") from None
    if settings.stream and settings.stream != "stderr":
        try:
            with open(settings.stream, "w", encoding="utf-8"):
                pass
        except OSError as exc:
            raise UsageError(f"--stream {settings.stream}: {exc.strerror or exc}") from None


def _save(profile: Any, path: str) -> str | None:
    from profkit.calltree import stream_writer

    try:
        announce = _stderr() if _isatty(_stderr()) else None  # "saving ..." after 1 s
        stream_writer.save(profile, path, announce=announce)
    except OSError as exc:
        return str(exc.strerror or exc)
    return None


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, OSError, ValueError):
        return False


def _stderr() -> Any:
    """The program may have replaced or closed ``sys.stderr``; fall back to the original."""
    stream = sys.stderr
    if stream is None or getattr(stream, "closed", False):
        stream = sys.__stderr__
    return stream


def _say(text: str) -> None:
    stream = _stderr()
    try:
        stream.write(text)
        stream.flush()
    except (OSError, ValueError, AttributeError):
        pass  # nowhere to say it; the profile is saved


def _ours(profiler: Any, parent_pid: int, current_session: Any) -> Any:
    """The profiler recording this process.

    In a forked child returning through ``profkit run``'s code, that is the fresh profiler
    the collector attached at the fork, not our inherited (detached) one.
    """
    if os.getpid() != parent_pid:
        session = current_session()
        if session is not None and hasattr(session.profiler, "quiet_this_thread"):
            return session.profiler
    return profiler


def _stop(profiler: Any, detach: Any) -> None:
    """Stop recording, then detach, so profkit's own detach work stays out of the profile."""
    profiler.stop_events()
    detach()


def _pass_through(outcome: Any) -> int:
    """End like the program: re-raise its SystemExit, else return its status."""
    if outcome.system_exit is not None and not outcome.terminated:
        raise outcome.system_exit
    return int(outcome.status)


def _program(args: argparse.Namespace) -> Any:
    from profkit.profilers.elt.program import Kind, Program

    rest = list(args.program)
    if rest and rest[0] == "--":
        rest = rest[1:]
    if args.as_module and args.as_code:
        raise UsageError("use either -m module or -c code, not both")
    if not rest:
        what = "module" if args.as_module else "code" if args.as_code else "script"
        raise UsageError(f"no {what} to run (usage: profkit run [options] script.py [args])")
    kind: Kind = "module" if args.as_module else "code" if args.as_code else "script"
    return Program(kind, rest[0], tuple(rest[1:]))


def _flag_text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def _make_profiler(settings: Settings) -> Any:
    from profkit.profilers.elt import EltProfiler, SamplingProfiler

    cls = SamplingProfiler if settings.mode == "sample" else EltProfiler
    return cls(settings, standalone=False, paused=True)


#: The env-activation variables (owned by profkit.collect's start-up hook).
_ENABLE = "PROFKIT_ENABLE_PROFILING"
_PROFILER = "PROFKIT_PROFILER"


@contextmanager
def _child_environment(settings: Settings, path: str) -> Iterator[None]:
    """Let child Python processes attach the same profiler with the same settings.

    Each child writes ``<stem>.<pid>.json`` and prints no tree (the parent reports them).
    The variables are removed again afterwards, so an in-process caller is left clean.
    """
    if not settings.subprocesses:
        yield
        return
    from profkit.profilers.elt.output import child_template

    cls = "SamplingProfiler" if settings.mode == "sample" else "EltProfiler"
    stream = settings.stream
    if stream and stream != "stderr":  # each child its own file, never the parent's
        stream = os.path.abspath(child_template(stream, default_suffix=""))
    child = settings.replace(
        output=os.path.abspath(child_template(path)), tree=False, stream=stream
    )
    env = {
        _ENABLE: "1",
        _PROFILER: f"profkit.profilers.elt:{cls}",
        COLLECTOR_INTERVAL_VAR: collector_interval_text(settings),
        **child.serialize(),
    }
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _child_files(path: str, started: float) -> list[str]:
    from profkit.profilers.elt.output import PID, child_template

    # What glob("<stem>.[0-9]*<suffix>") would find, without importing glob (start-up time).
    directory, name = os.path.split(child_template(path))
    head, _, tail = name.partition(PID)
    try:
        entries = os.listdir(directory or ".")
    except OSError:
        return []
    found = []
    for entry in entries:
        middle = entry[len(head) : len(entry) - len(tail)]
        if (
            entry.startswith(head)
            and entry.endswith(tail)
            and len(entry) > len(head) + len(tail)
            and middle[:1].isdigit()
        ):
            full = os.path.join(directory, entry)
            if _mtime(full) >= started - 1:
                found.append(full)
    return sorted(found)


def _mtime(path: str) -> float:
    try:
        return os.path.getmtime(path)
    except OSError:
        return 0.0
