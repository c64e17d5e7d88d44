"""`profkit attach PID`: sample a running Python process from outside, save its profile.

Also home of the options ``attach``, ``top`` and ``dump`` share (rate, mode, children).
The work is :mod:`profkit.sampler`'s; this module parses, prints and exits.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from typing import Any

from profkit.errors import UsageError
from profkit.settings import SAMPLE_CLOCK_HELP, SAMPLE_CLOCKS

MODE_HELP = SAMPLE_CLOCK_HELP


def add_target(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "pid",
        metavar="PID",
        help="process id of a running CPython 3.11-3.13 or .NET (CoreCLR 3.0+) program",
    )


def add_sampling_options(parser: argparse.ArgumentParser, modes: tuple[str, ...] = ()) -> None:
    """--rate, --mode (a sampling clock, or one of ``modes``), --no-children (attach, top)."""
    parser.add_argument(
        "--rate",
        "-r",
        metavar="HZ",
        default="1000",
        help="samples per second (default 1000; '10k' is 10000)",
    )
    parser.add_argument(
        "--mode",
        choices=(*SAMPLE_CLOCKS, *modes),
        default="wall",
        help=MODE_HELP + (f"; {', '.join(modes)}: a .NET process's allocations" if modes else ""),
    )
    parser.add_argument(
        "--no-children",
        action="store_true",
        help="do not follow child Python processes (followed by default: new children are "
        "looked for every 20 ms, so one that ends within ~20 ms of its start may be missed)",
    )


def parse_pid(text: str) -> int:
    try:
        pid = int(text)
    except ValueError:
        raise UsageError(f"PID must be a process id (a positive integer), not {text!r}") from None
    if pid <= 0:
        raise UsageError(f"PID must be a positive integer, not {pid}")
    return pid


def parse_rate(text: str) -> float:
    raw = text.strip().lower()
    scale = 1000.0 if raw.endswith("k") else 1.0
    try:
        rate = float(raw[:-1] if scale > 1 else raw) * scale
    except ValueError:
        raise UsageError(
            f"--rate {text!r}: expected samples per second, e.g. 1000 or 10k"
        ) from None
    if not 0 < rate <= 1_000_000:
        raise UsageError(f"--rate {text!r}: must be between 0 and 1000000 Hz")
    return rate


def parse_seconds(text: str | None) -> float | None:
    """``5`` (seconds), ``500ms``, ``2s``; None stays None (until the target exits)."""
    if text is None:
        return None
    from profkit.report._fmt import parse_duration

    raw = text.strip()
    try:
        seconds = float(raw)
    except ValueError:
        seconds = parse_duration(raw) / 1e9
    if seconds <= 0:
        raise UsageError(f"--duration {text!r}: must be positive")
    return seconds


def options_from(args: argparse.Namespace, duration: float | None = None) -> Any:
    from profkit.sampler import SamplerOptions

    return SamplerOptions(
        rate=parse_rate(args.rate),
        mode=args.mode,
        duration=duration,
        follow_children=not args.no_children,
    )


def ending(pid: int, ended: str) -> str:
    """How sampling ``pid`` ended, in words that cannot be read as profkit having stopped
    (SIGSTOP) the process: "pid N stopped" made users think so (finding N13)."""
    if not ended:
        return f"pid {pid} still running"
    if ended == "stopped":  # profkit stopped sampling (duration, Ctrl-C); the process runs on
        return f"sampling stopped; pid {pid} runs on"
    return f"pid {pid} {ended}"


def register(sub: Any, name: str, help_text: str) -> None:
    """Add the `attach` parser to the ``profkit`` subparsers."""
    parser = sub.add_parser(
        name,
        help=help_text,
        description=help_text
        + ". The process is never paused; Ctrl-C (or --duration) ends sampling and saves.",
    )
    add_target(parser)
    parser.add_argument(
        "--duration",
        "-d",
        metavar="SECONDS",
        help="stop after this long (e.g. 10, 500ms); default: until the process exits or Ctrl-C",
    )
    parser.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="profile file (default profkit-attach-PID-<random>.json; .gz compresses; "
        "an export ending such as .html or .speedscope.json writes that format)",
    )
    add_sampling_options(parser, ("memory",))
    parser.add_argument(
        "--idle",
        action="store_true",
        help="include idle threads (sleeping or waiting): --mode wall. By default attach "
        "hides them, as py-spy does (--mode active: a thread counts while the kernel has "
        "it running or runnable); its header says so",
    )
    parser.add_argument("--no-tree", action="store_true", help="do not print the call tree")
    # No default mode here: with neither --mode nor --idle, attach is --mode active.
    parser.set_defaults(handler=_handler, mode=None)


def _attach_mode(args: argparse.Namespace) -> str:
    """The mode attach samples in: ``--mode`` as given, else wall with ``--idle``, else
    active. Why active by default (issue #25): in wall mode a thread asleep for the whole
    run showed 100 % of it, above the work the user attached to look at."""
    if args.mode is None:
        return "wall" if args.idle else "active"
    if args.idle and args.mode != "wall":
        raise UsageError(
            f"--idle is wall time for every thread; it cannot go with --mode {args.mode}"
        )
    return str(args.mode)


def _handler(args: argparse.Namespace) -> int:
    from profkit.cli import dotnet_pid
    from profkit.sampler.errors import AttachError  # not at import: every command loads this module

    pid = parse_pid(args.pid)
    kind = dotnet_pid.route(pid)
    if kind == "dotnet":
        args.mode = args.mode or "wall"  # the runtime's own sampler: every thread, as before
        return dotnet_pid.attach(args, pid, parse_seconds(args.duration))
    if args.mode == "memory":
        raise UsageError(
            "--mode memory on a running process is for .NET programs; a Python program's "
            "allocations: profkit run --mode memory script.py"
        )
    args.mode = _attach_mode(args)
    try:
        return _attach_python(args, pid)
    except AttachError as exc:
        if kind == "unknown" and type(exc) is AttachError:
            raise dotnet_pid.neither(pid) from None
        raise


def _attach_python(args: argparse.Namespace, pid: int) -> int:
    from profkit.export.destination import Destination
    from profkit.runner import output as out
    from profkit.sampler import SamplerSession

    options = options_from(args, parse_seconds(args.duration))
    # -o out.html / .speedscope.json / ...: that format (as profkit run decides it)
    destination = Destination.decide(args.output, "", f"attach-{pid}")
    path = destination.path
    directory = os.path.dirname(destination.file)
    if not (os.path.isdir(directory) and os.access(directory, os.W_OK)):
        # Before sampling, not after: the samples would be lost.
        raise UsageError(f"-o {path}: cannot write in {directory or '.'}")
    session = SamplerSession(pid, options)
    hidden = "; idle threads hidden (--idle shows them)" if options.mode == "active" else ""
    print(
        f"profkit: sampling pid {pid} (CPython {session.recorders[pid].python}) at "
        f"{options.rate:g} Hz, mode {options.mode}{hidden}; Ctrl-C to stop",
        file=sys.stderr,
    )
    previous = signal.signal(signal.SIGTERM, lambda *_: session.stop())
    try:
        session.run()
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        session.close()
    profiles = session.profiles()
    written = []
    for child_pid, profile in profiles.items():
        where = destination if child_pid == pid else destination.child(child_pid)
        error = where.save(profile)
        if error:
            raise OSError(f"cannot write profile {where.file}: {error}")
        written.append(where.file)
    main = profiles[pid]
    if not args.no_tree:
        sys.stderr.write(out.render(main, sys.stderr))
    stats = session.stats
    print(
        f"profkit: {stats.ticks} samples in {stats.elapsed_ns / 1e9:.2f} s "
        f"({stats.ticks / max(stats.elapsed_ns / 1e9, 1e-9):.0f}/s of {options.rate:g} asked, "
        f"{stats.cost_us:.1f} us each); {ending(pid, session.recorders[pid].ended)}",
        file=sys.stderr,
    )
    note = stats.busy_note()
    if note:
        print(f"profkit: {note}", file=sys.stderr)
    sys.stderr.write(destination.announcement())
    if len(written) > 1:
        print(
            f"profkit: {len(written) - 1} child process profile(s): {', '.join(written[1:4])}",
            file=sys.stderr,
        )
    return 0
