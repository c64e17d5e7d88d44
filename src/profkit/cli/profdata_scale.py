"""`profdata merge` at scale: the Dask engine, quarantined inputs, mismatch reports (#16).

Kept beside :mod:`profkit.cli.profdata_merge` (which registers the options and calls in
here) so that the common merge path stays short:

* ``--dask local|tcp://HOST:PORT`` runs the merge on dask.distributed
  (:mod:`profkit.formats.instrprof.merge.on_dask`, chosen by the merge request);
* ``--bad-inputs FILE`` lists, one per line, the inputs that could not be merged (with
  ``--failure-mode=warn`` the merge goes on without them);
* SIGTERM unwinds a merge (:func:`sigterm_unwinds`) so ``-j`` workers and temp outputs
  go with it;
* ``--show-mismatched N`` caps the per-function mismatch warnings (fleet merges of
  thousands of files repeat one mismatch thousands of times) and names the functions
  whose records disagree, instead of only counting them.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from typing import Any

from profkit.errors import UsageError

#: The per-record problems that mean "this function's data does not match".
_MISMATCH_MARKERS = ("(counter mismatch)", "(bitmap size mismatch)")


def add_correlation_options(p: argparse.ArgumentParser) -> None:
    """``--binary-file`` / ``--debug-info``: raw files written for correlation (``show`` too)."""
    p.add_argument(
        "--binary-file",
        metavar="BIN",
        help="the executable built with -mllvm -profile-correlate=binary that wrote the "
        "raw inputs (its function records and names are read from it; needs pyelftools)",
    )
    p.add_argument(
        "--debug-info",
        metavar="BIN",
        help="the executable built with -g -mllvm -profile-correlate=debug-info (LLVM 14-16: "
        "-debug-info-correlate) that wrote the raw inputs (DWARF; needs pyelftools)",
    )


def correlation(args: argparse.Namespace) -> Any:
    """``--binary-file`` / ``--debug-info`` as a :class:`Correlation`, or None."""
    binary, debug = getattr(args, "binary_file", None), getattr(args, "debug_info", None)
    if binary and debug:
        raise UsageError("--binary-file and --debug-info exclude each other")
    if not (binary or debug):
        return None
    from profkit.formats.instrprof.correlate import Correlation

    return Correlation("binary", str(binary)) if binary else Correlation("debug-info", str(debug))


def check_correlation(args: argparse.Namespace) -> None:
    correlation(args)


def add_options(p: argparse.ArgumentParser) -> None:
    """The scale-out options of ``merge``."""
    add_correlation_options(p)
    p.add_argument(
        "--dask",
        metavar="local|tcp://HOST:PORT",
        help="merge on dask.distributed: a local cluster of -j worker processes, or the "
        "scheduler at that address (pip install 'profkit[dask]')",
    )
    p.add_argument(
        "--bad-inputs",
        metavar="FILE",
        help="write the inputs that could not be merged to FILE, one per line "
        "(with --failure-mode=warn the merge goes on without them)",
    )
    p.add_argument(
        "--show-mismatched",
        type=int,
        default=20,
        metavar="N",
        help="name at most N functions whose counter count or hash differs between "
        "inputs (default 20; 0 = all)",
    )


def check_options(args: argparse.Namespace) -> None:
    check_correlation(args)
    if args.show_mismatched < 0:
        raise UsageError("--show-mismatched must be 0 (all) or more")
    if args.dask is not None and args.dask != "local" and "://" not in args.dask:
        raise UsageError(
            f"--dask {args.dask}: expected 'local' or a scheduler address like tcp://HOST:PORT"
        )


def report_warnings(warnings: Sequence[str], profile: Any, limit: int) -> None:
    """Print merge warnings; mismatch warnings beyond ``limit`` are counted, not listed."""
    shown = 0
    hidden = 0
    for warning in warnings:
        if any(marker in warning for marker in _MISMATCH_MARKERS):
            if limit and shown >= limit:
                hidden += 1
                continue
            shown += 1
        print(f"profkit: warning: {warning}", file=sys.stderr)
    if hidden:
        print(
            f"profkit: warning: {hidden} more mismatch warning(s) not shown "
            "(--show-mismatched=0 shows all)",
            file=sys.stderr,
        )
    names = _names_with_several_hashes(profile)
    if names:
        listed = names if not limit else names[:limit]
        more = (
            f" (first {len(listed)}; --show-mismatched=0 lists all)"
            if len(listed) < len(names)
            else ""
        )
        print(
            f"profkit: warning: {len(names)} function(s) have records with different hashes "
            f"across inputs (kept apart, as llvm-profdata does){more}: {', '.join(listed)}",
            file=sys.stderr,
        )


def _names_with_several_hashes(profile: Any) -> list[str]:
    """Names with more than one (non context-sensitive) record: their hashes differ."""
    from profkit.formats.instrprof.model import CS_FLAG_IN_FUNC_HASH

    seen: dict[str, int] = {}
    for record in profile.records:
        if not record.hash & CS_FLAG_IN_FUNC_HASH:
            seen[record.name] = seen.get(record.name, 0) + 1
    return [name for name, count in seen.items() if count > 1]


def write_bad_inputs(path: str, failures: Sequence[tuple[str, str]]) -> None:
    """``--bad-inputs``: the inputs that could not be merged, one per line (atomically)."""
    from profkit._atomic import write_atomic, write_errors

    text = "".join(f"{failed}\n" for failed, _ in failures)
    with write_errors(f"cannot write {path}: "):
        write_atomic(path, text.encode("utf-8", "surrogateescape"))


class _Terminated(BaseException):
    """SIGTERM during a merge, raised so that it unwinds like Ctrl-C does."""


@contextlib.contextmanager
def sigterm_unwinds() -> Iterator[None]:
    """Turn SIGTERM into an exception for the duration of a merge, then die of it.

    By default SIGTERM ends the process on the spot: ``-j`` workers were left running
    (65-80 MB each) and a temp output behind. Unwinding runs the cleanup (the pool is
    killed, the atomic writer removes its temp file); then the process ends by SIGTERM
    itself, so the caller sees the status it expects (-15, 143 in a shell).
    """
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers can only be set from the main thread
        return

    def raise_terminated(signum: int, frame: object) -> None:
        raise _Terminated

    previous = signal.signal(signal.SIGTERM, raise_terminated)
    try:
        yield
    except _Terminated:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGTERM)
        raise SystemExit(128 + signal.SIGTERM) from None  # only if the kill was delayed
    finally:
        signal.signal(signal.SIGTERM, previous)
