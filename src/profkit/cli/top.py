"""`profkit top PID`: a live view of a running process's hottest functions, like py-spy top."""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
from typing import Any

from profkit._atomic import write_stdout
from profkit.cli.attach import (
    add_sampling_options,
    add_target,
    ending,
    options_from,
    parse_pid,
    parse_seconds,
)


def register(sub: Any, name: str, help_text: str) -> None:
    """Add the `top` parser to the ``profkit`` subparsers."""
    parser = sub.add_parser(name, help=help_text, description=help_text + ". Ctrl-C quits.")
    add_target(parser)
    add_sampling_options(parser)
    parser.add_argument(
        "--refresh", metavar="SECONDS", default="1", help="seconds between refreshes (default 1)"
    )
    parser.add_argument(
        "--duration", "-d", metavar="SECONDS", help="quit after this long (default: never)"
    )
    parser.set_defaults(handler=_handler)


def _handler(args: argparse.Namespace) -> int:
    from profkit.cli import dotnet_pid
    from profkit.sampler.errors import AttachError

    pid = parse_pid(args.pid)
    refresh = parse_seconds(args.refresh) or 1.0
    kind = dotnet_pid.route(pid)
    if kind == "dotnet":
        return dotnet_pid.top(args, pid, refresh, parse_seconds(args.duration))
    try:
        return _top_python(args, pid, refresh)
    except AttachError as exc:
        if kind == "unknown" and type(exc) is AttachError:
            raise dotnet_pid.neither(pid) from None
        raise


def _top_python(args: argparse.Namespace, pid: int, refresh: float) -> int:
    from profkit.sampler import SamplerSession
    from profkit.sampler.top import TopState, render_top

    session = SamplerSession(pid, options_from(args, parse_seconds(args.duration)))
    state = TopState()
    tty = sys.stdout.isatty()

    def draw(s: SamplerSession) -> None:
        size = shutil.get_terminal_size((100, 30))
        text = render_top(s, state, rows=max(size.lines - 5, 5), width=size.columns)
        screen = ("\x1b[H\x1b[2J" if tty else "") + text + ("" if tty else "\n")
        write_stdout(screen.encode("utf-8", "backslashreplace"))  # checked (issue #22)

    previous = signal.signal(signal.SIGTERM, lambda *_: session.stop())
    try:
        session.run(on_tick=draw, every_s=refresh)
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        session.close()
    draw(session)
    ended = session.recorders[pid].ended
    if ended:
        print(f"profkit: {ending(pid, ended)}", file=sys.stderr)
    return 0
