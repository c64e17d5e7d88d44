"""`profkit top PID`: a live view of a running process's hottest functions, like py-spy top."""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import sys
import time
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
    parser = sub.add_parser(
        name,
        help=help_text,
        description=help_text + ". Keys on a terminal: 1-4 sort by %%Own, %%Total, OwnTime, "
        "TotalTime; p (or space) pauses the view; q (or Ctrl-C) quits.",
    )
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
    from profkit.sampler.top import TopState, press, render_top

    session = SamplerSession(pid, options_from(args, parse_seconds(args.duration)))
    state = TopState()
    tty = sys.stdout.isatty()
    drawn = [0.0]

    def draw(s: SamplerSession) -> None:
        drawn[0] = time.monotonic()
        size = shutil.get_terminal_size((100, 30))
        text = render_top(s, state, rows=max(size.lines - 6, 5), width=size.columns)
        screen = ("\x1b[H\x1b[2J" if tty else "") + text + ("" if tty else "\n")
        write_stdout(screen.encode("utf-8", "backslashreplace"))  # checked (issue #22)

    def tick(s: SamplerSession) -> None:
        changed = False
        for key in keys.read() if keys else ():
            changed = press(state, key) or changed
        if state.quit:
            s.stop()
        elif changed or not keys or (not state.paused and time.monotonic() - drawn[0] >= refresh):
            draw(s)

    keys = Keys.open() if tty else None
    previous = signal.signal(signal.SIGTERM, lambda *_: session.stop())
    try:
        session.run(on_tick=tick, every_s=min(refresh, 0.1) if keys else refresh)
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        session.close()
        if keys:
            keys.close()
    if not state.quit:
        draw(session)
    ended = session.recorders[pid].ended
    if ended:
        print(f"profkit: {ending(pid, ended)}", file=sys.stderr)
    return 0


class Keys:
    """The terminal's keys one at a time, without echo or Enter (cbreak), read without
    waiting; the terminal is given back as it was."""

    def __init__(self, fd: int, saved: list[Any]) -> None:
        self.fd, self.saved = fd, saved

    @classmethod
    def open(cls) -> Keys | None:
        """Keys from stdin when it is a terminal, else None (no keys, as before)."""
        import termios
        import tty

        try:
            fd = sys.stdin.fileno()
            if not os.isatty(fd):
                return None
            saved = termios.tcgetattr(fd)
            tty.setcbreak(fd)
        except (OSError, ValueError, termios.error):
            return None
        return cls(fd, saved)

    def read(self) -> str:
        """The keys pressed since the last read ("" when none)."""
        import select

        got = ""
        while select.select([self.fd], [], [], 0)[0]:
            chunk = os.read(self.fd, 64)
            if not chunk:
                break
            got += chunk.decode("latin-1")
        return got

    def close(self) -> None:
        import termios

        with contextlib.suppress(OSError, termios.error):
            termios.tcsetattr(self.fd, termios.TCSADRAIN, self.saved)
