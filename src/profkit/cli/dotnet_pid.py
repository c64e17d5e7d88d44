"""``attach``, ``top`` and ``dump`` when the PID is a .NET process (routed here by kind).

The work is :mod:`profkit.dotnet`'s (EventPipe through the runtime's diagnostics port;
nothing is loaded into the target); this module prints and saves. ``-o FILE.nettrace``
keeps the raw stream instead of a profile (``profkit report FILE.nettrace`` opens it).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import sys
import threading
import time
from collections.abc import Iterator

from profkit._atomic import write_stdout
from profkit.errors import UsageError


def route(pid: int) -> str:
    """``dotnet``, ``python`` or ``unknown`` (see :func:`profkit.dotnet.process.kind_of`)."""
    from profkit.dotnet.process import kind_of

    return kind_of(pid)


def neither(pid: int) -> UsageError:
    from profkit.dotnet.process import neither_message

    return UsageError(neither_message(pid))


@contextlib.contextmanager
def _stopping(stop: threading.Event) -> Iterator[None]:
    """Ctrl-C and SIGTERM end sampling (the profile is still saved), not profkit."""
    handler = lambda *_: stop.set()  # noqa: E731
    saved = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, previous in saved.items():
            signal.signal(s, previous)


def _clock(args: argparse.Namespace) -> str:
    from profkit.dotnet.profile import check_clock

    return check_clock(getattr(args, "mode", "wall"), "--mode")


def attach(args: argparse.Namespace, pid: int, duration: float | None) -> int:
    from profkit.dotnet.commands import sample_pid
    from profkit.export.destination import Destination
    from profkit.runner import output as out

    # as profkit run and attach PID (Python) decide it; -o FILE.nettrace: the raw stream
    destination = Destination.decide(args.output, "", f"attach-{pid}")
    path, absolute = destination.path, destination.file
    directory = os.path.dirname(absolute)
    if not (os.path.isdir(directory) and os.access(directory, os.W_OK)):
        raise UsageError(f"-o {path}: cannot write in {directory or '.'}")
    from profkit.dotnet.process import diagnostics_socket

    diagnostics_socket(pid)  # a port turned off is said before anything else
    if args.mode == "memory":
        from profkit.cli.dotnet_memory import attach_memory

        stop = threading.Event()
        return attach_memory(args, pid, duration, destination, _stopping(stop), stop)
    if args.rate != "1000":
        print("profkit: note: --rate is ignored for .NET: the runtime's sampler ticks every 1 ms",
              file=sys.stderr)  # fmt: skip
    print(
        f"profkit: sampling pid {pid} (.NET, EventPipe sample profiler, ~1 kHz); Ctrl-C to stop",
        file=sys.stderr,
    )
    stop = threading.Event()
    raw = absolute.endswith(".nettrace")
    with _stopping(stop), open(absolute, "wb") if raw else contextlib.nullcontext() as fh:
        profile, why = sample_pid(pid, duration=duration, stop=stop, clock=_clock(args), raw=fh)
    sampler = profile.metadata["sampler"]
    if not raw:
        error = destination.save(profile)
        if error:
            raise OSError(f"cannot write profile {absolute}: {error}")
    if not args.no_tree:
        sys.stderr.write(out.render(profile, sys.stderr))
    seconds = profile.metadata["duration_ns"] / 1e9
    ended = {"exited": f"pid {pid} exited", "duration": "sampling stopped; pid {pid} runs on"}
    print(
        f"profkit: {sampler['samples']} samples in {seconds:.2f} s from "
        f"{len(sampler['threads'])} thread(s); "
        + ended.get(why, f"sampling stopped; pid {pid} runs on").format(pid=pid),
        file=sys.stderr,
    )
    if raw:
        print(f"profkit: EventPipe stream (nettrace) saved to {path}", file=sys.stderr)
    else:
        sys.stderr.write(destination.announcement())
    return 0


def top(args: argparse.Namespace, pid: int, refresh: float, duration: float | None) -> int:
    """The .NET top, with the Python top's keys on a terminal (1-4 sort, p pause, q quit)."""
    from profkit._topkeys import press
    from profkit.cli.top import Keys
    from profkit.dotnet.commands import TopState, render_top, sample_pid
    from profkit.dotnet.session import LiveSession

    state = TopState()
    tty = sys.stdout.isatty()
    drawn = [0.0]
    last: list[LiveSession] = []

    def draw(session: LiveSession) -> None:
        drawn[0] = time.monotonic()
        size = shutil.get_terminal_size((100, 30))
        text = render_top(session, state, rows=max(size.lines - 6, 5), width=size.columns)
        sys.stdout.write(("\x1b[H\x1b[2J" if tty else "") + text + ("" if tty else "\n"))
        sys.stdout.flush()

    def tick(session: LiveSession) -> None:
        last[:] = [session]
        changed = False
        for key in keys.read() if keys else ():
            changed = press(state, key) or changed
        if state.quit:
            stop.set()
        elif changed or not keys or (not state.paused and time.monotonic() - drawn[0] >= refresh):
            draw(session)

    stop = threading.Event()
    keys = Keys.open() if tty else None
    try:
        with _stopping(stop):
            every = min(refresh, 0.1) if keys else refresh
            _, why = sample_pid(pid, duration=duration, stop=stop, on_tick=tick, every_s=every)
    finally:
        if keys:
            keys.close()
    if keys and last and not state.quit:
        draw(last[0])  # the last screen, with the rundown's names, even when paused
    if why == "exited":
        print(f"profkit: pid {pid} exited", file=sys.stderr)
    return 0


def dump(pid: int) -> int:
    from profkit.dotnet.commands import dump as take
    from profkit.dotnet.commands import format_dump

    write_stdout(format_dump(pid, take(pid)).encode("utf-8", "surrogateescape"))
    return 0
