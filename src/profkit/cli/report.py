"""`profkit report`: print a saved profile as a call tree, a flat table or a callers view."""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import shutil
import sys
from collections.abc import Iterator
from typing import Any

from profkit._atomic import write_stdout
from profkit.calltree.document import Progress
from profkit.calltree.file import combine, load
from profkit.calltree.model import CallProfile
from profkit.cli.progress import ProgressLine, add_progress_argument, progress_line
from profkit.errors import UsageError
from profkit.report._fmt import parse_duration
from profkit.report.flat import render_callers, render_flat
from profkit.report.lines import line_rows, merge_rows, render_lines
from profkit.report.metric import METRICS, memory_view
from profkit.report.text import render_tree


def register(sub: Any, name: str, help_text: str) -> None:
    """Add the `report` parser to the ``profkit`` subparsers."""
    parser = sub.add_parser(
        name,
        help=help_text,
        description=help_text + ". Several files (one per process) are combined.",
    )
    parser.add_argument("files", nargs="+", metavar="FILE", help="profile saved by 'profkit run'")
    parser.add_argument(
        "--view",
        choices=("tree", "flat", "callers"),
        default="tree",
        help="call tree (default), one line per function, or who calls --function",
    )
    add_metric_argument(parser)
    add_progress_argument(parser)
    _add_lines_argument(parser)
    parser.add_argument(
        "--function",
        "-f",
        metavar="F",
        help="function for --view callers (full name, last part, or substring)",
    )
    parser.add_argument(
        "--min-time",
        metavar="DURATION",
        default="0",
        help="hide entries with less total time, e.g. 1ms, 250us, 0.5s",
    )
    parser.add_argument(
        "--min-share",
        metavar="PERCENT",
        type=float,
        default=0.5,
        help="tree: hide nodes under this %% of their thread's time (default 0.5)",
    )
    parser.add_argument("--all", action="store_true", help="tree: show every node (--min-share 0)")
    parser.add_argument(
        "--prefix",
        metavar="P[,P...]",
        help="keep only functions under these module prefixes (e.g. myapp)",
    )
    parser.add_argument(
        "--top", type=int, metavar="N", help="tree: N hottest children per node; flat: N functions"
    )
    parser.add_argument("--max-depth", type=int, metavar="N", help="tree: stop at this depth")
    parser.add_argument(
        "--fold",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="tree: fold import machinery and chains of frames that pass all their time "
        "to one callee (default: on, off with --all)",
    )
    parser.add_argument(
        "--hot-spots",
        type=int,
        default=3,
        metavar="N",
        help="tree: list the N functions with the most self time above each thread's tree "
        "(default 3; 0 for none)",
    )
    parser.add_argument(
        "--sort",
        choices=("exclusive", "inclusive", "calls"),
        default="exclusive",
        help="flat: sort key (default: self time)",
    )
    parser.add_argument(
        "--width",
        type=int,
        metavar="N",
        help="output width (default: the terminal's; names in full when stdout is not a terminal)",
    )
    parser.add_argument(
        "--color",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="colour the output (default: when stdout is a terminal and NO_COLOR is unset)",
    )
    parser.set_defaults(handler=_handler)


def add_metric_argument(parser: argparse.ArgumentParser) -> None:
    """``--metric``: which bytes a memory profile shows (time profiles have one metric)."""
    parser.add_argument(
        "--metric",
        choices=METRICS,
        default="alloc",
        help="memory profiles (run --mode memory): bytes allocated (default), alive at the "
        "peak, or still alive at the end (leaked)",
    )


def _add_lines_argument(parser: argparse.ArgumentParser) -> None:
    """``--lines``: the line view of a sampled profile (:mod:`profkit.report.lines`)."""
    parser.add_argument(
        "--lines",
        action="store_true",
        help="the hottest lines (file:line) with their share of the samples, like "
        "py-spy's line view (sampled profiles; --top N, default 20)",
    )


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Run a command's load/aggregate/render with the cyclic GC off.

    A profile becomes hundreds of thousands of small acyclic objects (call nodes, their
    child dicts, rows); every generation-2 collection while they are built and walked
    re-traverses all of them, which made a 500k-node flat report 2-3x slower. Nothing
    here creates cycles, and the previous state is restored afterwards.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def load_all(
    paths: list[str], metric: str = "alloc", progress: Progress | None = None
) -> CallProfile:
    """Load one profile, or several combined; for memory profiles, the ``metric`` view
    (``alloc``, ``peak`` or ``leaked``: :func:`profkit.report.metric.memory_view`);
    ``progress`` is told the loader's steps (:mod:`profkit.cli.progress` draws them)."""
    profiles = [memory_view(_load(p, progress), metric, p) for p in paths]
    return profiles[0] if len(profiles) == 1 else combine(profiles)


def _load(path: str, progress: Progress | None = None) -> CallProfile:
    """A saved profile, or a .NET nettrace file (any writer's) read as one."""
    from profkit.dotnet.nettracefile import is_nettrace, profile_of_file

    if is_nettrace(path):
        return profile_of_file(path)
    return load(path, progress)


def tree_width(flag: int | None) -> int | None:
    """Every view's width: ``--width``, else the terminal's; ``None`` (names in full, never
    cut) when stdout is a file or a pipe (issue #11: cut names helped nobody there).

    Only a terminal's size matters: ``shutil.get_terminal_size`` alone would also take
    ``COLUMNS`` or the size of the terminal the process started from while stdout goes to
    a file or pipe (as under pytest), so piped output would depend on where it ran.
    """
    if flag is not None:
        return flag
    return shutil.get_terminal_size((80, 24)).columns if sys.stdout.isatty() else None


def use_color(flag: bool | None) -> bool:
    """Explicit flag, else a terminal without ``NO_COLOR`` (https://no-color.org)."""
    if flag is not None:
        return flag
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR")


def _handler(args: argparse.Namespace) -> int:
    min_time = parse_duration(args.min_time)
    if args.width is not None and args.width < 20:
        raise UsageError("--width must be at least 20")
    if args.top is not None and args.top < 1:
        raise UsageError("--top must be at least 1")
    if args.hot_spots < 0:
        raise UsageError("--hot-spots must be 0 or more")
    if args.max_depth is not None and args.max_depth < 0:
        raise UsageError("--max-depth must be 0 or more")
    if not 0 <= args.min_share <= 100:
        raise UsageError("--min-share must be a percentage between 0 and 100")
    width = tree_width(args.width)
    color = use_color(args.color)
    progress = progress_line(args.progress)
    try:
        with gc_paused():
            text = _render(args, width, color, min_time, progress)
    finally:
        if progress is not None:
            progress.close()
    write_stdout(text.encode("utf-8", "backslashreplace"))
    return 0


def _render(
    args: argparse.Namespace,
    width: int | None,
    color: bool,
    min_time: int,
    progress: ProgressLine | None,
) -> str:
    if args.lines:
        return _render_lines(args, width, color, progress)
    profile = load_all(args.files, args.metric, progress)
    if progress is not None:
        progress("rendering")
    if args.view == "tree":
        text = render_tree(
            profile,
            width=width,
            color=color,
            min_time_ns=min_time,
            prefix=args.prefix,
            max_depth=args.max_depth,
            top=args.top,
            min_share=0.0 if args.all else args.min_share / 100,
            fold=not args.all if args.fold is None else args.fold,
            hot_spots=args.hot_spots,
        )
    elif args.view == "flat":
        text = render_flat(
            profile,
            width=width,
            color=color,
            min_time_ns=min_time,
            prefix=args.prefix,
            top=args.top,
            sort=args.sort,
        )
    else:
        if not args.function:
            raise UsageError("--view callers needs --function F")
        text = render_callers(profile, args.function, width=width, color=color, prefix=args.prefix)
    return text


def _render_lines(
    args: argparse.Namespace, width: int | None, color: bool, progress: Progress | None
) -> str:
    """``--lines``: each file's per-line samples read before any combining (their rows
    name frames by index in that file), then summed by ``file:line``."""
    groups = []
    total = 0
    for path in args.files:
        rows, samples = line_rows(_load(path, progress), path)
        groups.append(rows)
        total += samples
    rows = merge_rows(groups)
    return render_lines(rows, total, width=width, color=color, prefix=args.prefix, top=args.top)
