"""`profkit monitor`: receive profilers' live UDP streams and show lines, losses, hot functions."""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import threading
from types import FrameType
from typing import Any

from profkit._atomic import write_errors, write_stdout
from profkit.errors import UsageError
from profkit.monitor.core import Monitor
from profkit.monitor.server import (
    DEFAULT_HOST,
    DEFAULT_PORT,
    View,
    is_loopback,
    is_wildcard,
    open_socket,
    parse_listen,
    receive_buffer,
    serve,
)
from profkit.monitor.view import UNLIMITED_WIDTH, PlainView, ScreenView, summary


def register(sub: Any, name: str, help_text: str) -> None:
    """Add the `monitor` parser to the ``profkit`` subparsers."""
    parser = sub.add_parser(
        name,
        help=help_text,
        description=help_text + ". Send to it with 'profkit run --udp 127.0.0.1:2222 ...' "
        "(or PROFKIT_UDP). Ctrl-C prints the final summary.",
    )
    parser.add_argument(
        "--listen",
        metavar="HOST:PORT",
        help=f"address to listen on (default {DEFAULT_HOST}:{DEFAULT_PORT}; "
        "all interfaces with --allow-remote)",
    )
    parser.add_argument(
        "--allow-remote",
        action="store_true",
        help="accept datagrams from other machines (needed for 0.0.0.0 / ::)",
    )
    parser.add_argument(
        "--top",
        type=int,
        default=10,
        metavar="N",
        help="how many hottest functions to show (default 10)",
    )
    parser.add_argument(
        "--quiet",
        action="store_true",
        help="do not show the event lines, only counts and hot functions",
    )
    parser.add_argument(
        "--plain",
        action="store_true",
        help="plain line output even on a terminal (no refreshed screen)",
    )
    parser.add_argument(
        "--no-acks",
        action="store_true",
        help="do not acknowledge datagrams (senders then send at full speed and may "
        "overflow the receive buffer; by default they keep within a window, docs/wire.md)",
    )
    parser.add_argument(
        "--duration",
        type=float,
        metavar="SECONDS",
        help="stop by itself after this long (for scripts and benchmarks)",
    )
    parser.set_defaults(handler=_handler)


def listen_address(listen: str | None, allow_remote: bool) -> tuple[str, int]:
    """The address to bind: loopback unless remote senders were allowed explicitly."""
    if listen is None:
        return ("0.0.0.0" if allow_remote else DEFAULT_HOST), DEFAULT_PORT
    host, port = parse_listen(listen)
    if is_wildcard(host) and not allow_remote:
        raise UsageError(
            f"--listen {listen} would accept datagrams from any machine; "
            "add --allow-remote if that is what you want"
        )
    return host, port


def _handler(args: argparse.Namespace) -> int:
    if args.top < 0:
        raise UsageError("--top must be 0 or more")
    # written so that NaN fails too; the bound is what a thread timer can wait for
    # (inf or 1e300 crashed the timer thread with a traceback)
    if args.duration is not None and not 0 < args.duration <= threading.TIMEOUT_MAX:
        raise UsageError(
            f"--duration must be positive seconds, at most {threading.TIMEOUT_MAX:.0f}"
        )
    host, port = listen_address(args.listen, args.allow_remote)
    sock = open_socket(host, port)
    size = shutil.get_terminal_size((80, 24))
    view: View
    if sys.stdout.isatty() and not args.plain:
        view = ScreenView(
            sys.stdout, top=args.top, width=size.columns, height=size.lines, quiet=args.quiet
        )
    else:
        view = PlainView(sys.stdout, quiet=args.quiet, escape=sys.stdout.isatty())
    monitor = Monitor()
    stop = threading.Event()
    timer = threading.Timer(args.duration, stop.set) if args.duration else None
    # From here on, Ctrl-C or SIGTERM at any moment ends with the summary and status 0.
    previous = _stop_on_signals(stop)
    port = sock.getsockname()[1]  # the kernel's choice for --listen HOST:0
    try:
        where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        note = "" if is_loopback(host) else " (reachable from the network)"
        buffer = receive_buffer(sock) // 2  # Linux reports twice what it counts as data
        print(
            f"profkit monitor: listening on udp {where}{note} (receive buffer "
            f"{buffer >> 10} KB); Ctrl-C to stop",
            file=sys.stderr,
        )
        if timer is not None:
            timer.daemon = True
            timer.start()
        with write_errors("cannot write to stdout: "):  # the view's output (full disk)
            serve(sock, monitor, view, stop=stop, acknowledge=not args.no_acks)
    except KeyboardInterrupt:
        pass
    finally:
        if timer is not None:
            timer.cancel()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        sock.close()
    with write_errors("cannot write to stdout: "):
        view.close(monitor)
    # a terminal's width cuts the summary; a file or pipe gets whole lines
    width = size.columns if sys.stdout.isatty() else UNLIMITED_WIDTH
    write_stdout(summary(monitor, args.top, width).encode("utf-8", "backslashreplace"))
    return 0


def _stop_on_signals(stop: threading.Event) -> dict[int, Any]:
    """Ctrl-C and SIGTERM set ``stop``; the receive loop sees it within its idle timeout.

    Not ``KeyboardInterrupt``: raised asynchronously, it can land inside the view's
    ``flush`` after the bytes went out but before the buffer was marked empty, and the
    same lines were printed again at exit. Returns the old handlers (main thread only).
    """
    if threading.current_thread() is not threading.main_thread():
        return {}

    def handler(signum: int, frame: FrameType | None) -> None:
        stop.set()

    return {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
