"""`profkit profdata merge` (llvm-profdata's options).

Thin: gather the inputs (:mod:`.profdata_inputs`), turn the flags into a
:class:`~profkit.formats.instrprof.merge.request.MergeRequest` and hand it to
:func:`~profkit.formats.instrprof.merge.request.merge_inputs`, which merges (here, on
``-j`` workers or on Dask), chooses the version, filters and writes; print what it
reports, and write ``-o -`` to stdout. ``overlap`` is :mod:`.profdata_overlap`.
Bad input is a :class:`ProfkitError` (one line, exit status 2); per-input problems are
warnings on stderr, one line each, naming the file.

Imported by ``profkit profdata show`` too (argparse needs every subparser), so module
level imports stay minimal; readers, writers and file helpers load in the handlers.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any, TextIO

from profkit.cli import profdata_scale, profdata_spelling
from profkit.cli.profdata_inputs import gather_inputs
from profkit.formats.instrprof.versions import INDEXED_BY_RELEASE, REPRODUCED_RELEASES

#: llvm-profdata release → the indexed version its `merge` writes (the releases profkit
#: reproduces byte for byte; the table is :mod:`profkit.formats.instrprof.versions`).
LLVM_INDEXED_VERSION = {r: INDEXED_BY_RELEASE[r] for r in REPRODUCED_RELEASES}


def register(sub: Any) -> None:
    """Add ``merge`` to the ``profkit profdata`` subparsers."""
    _register_merge(sub)


# ---------------------------------------------------------------------------------------
# merge


def _register_merge(sub: Any) -> None:
    help_text = "merge raw, indexed and text profiles into one indexed (or text) profile"
    p = sub.add_parser("merge", help=help_text, description=help_text)
    p.add_argument(
        "inputs",
        nargs="*",
        metavar="FILE|DIR",
        help="profiles; directories are searched recursively",
    )
    p.add_argument(
        "-o", "--output", required=True, help="output file (written atomically; '-' = stdout)"
    )
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--text", action="store_true", help="write the text format")
    fmt.add_argument("--binary", action="store_true", help="write the indexed format (default)")
    p.add_argument(
        "--indexed-version",
        type=int,
        metavar="N",
        help="indexed format version to write: 7 (LLVM 14) … 13 (LLVM 22); default: the "
        "newest the producer of the inputs reads (said on stderr)",
    )
    p.add_argument(
        "--llvm-default",
        action="store_true",
        help="write llvm-profdata's default, its newest indexed version (13), whatever "
        "produced the inputs",
    )
    p.add_argument(
        "--llvm-version",
        type=int,
        choices=sorted(LLVM_INDEXED_VERSION),
        help="write exactly what llvm-profdata-N writes (text dialect and indexed version)",
    )
    profdata_spelling.add_kind_option(p)
    _add_input_options(p)
    _add_content_options(p)
    profdata_scale.add_options(p)
    p.set_defaults(handler=run_merge)


def _add_input_options(p: argparse.ArgumentParser) -> None:
    """Weighted inputs and input lists (gathered by :func:`gather_inputs`)."""
    p.add_argument(
        "--weighted-input",
        action="append",
        default=[],
        metavar="W,FILE",
        help="an input whose counts are multiplied by W (repeatable)",
    )
    p.add_argument(
        "-f",
        "--input-files",
        action="append",
        default=[],
        metavar="LIST",
        help="a file listing inputs, one '[W,]path' per line ('#' comments)",
    )


def _add_content_options(p: argparse.ArgumentParser) -> None:
    """What the merged profile keeps, how the merge runs, and when it fails."""
    p.add_argument("--sparse", action="store_true", help="drop functions whose counts are all zero")
    p.add_argument(
        "--temporal-profile-trace-reservoir-size",
        type=int,
        default=100,
        metavar="N",
        help="temporal traces kept (a random sample once more were seen; default 100)",
    )
    p.add_argument(
        "--temporal-profile-max-trace-length",
        type=int,
        default=10000,
        metavar="N",
        help="functions kept per temporal trace (default 10000)",
    )
    p.add_argument("--function", metavar="REGEX", help="keep only functions whose name matches")
    p.add_argument("--no-function", metavar="REGEX", help="drop functions whose name matches")
    p.add_argument(
        "-j",
        "--num-threads",
        type=int,
        default=0,
        metavar="N",
        help="writers merged pairwise and worker processes, as llvm-profdata -j N "
        "(default: min(CPUs, (inputs + 1) / 2))",
    )
    p.add_argument(
        "--failure-mode",
        choices=("any", "all", "warn"),
        default="any",
        help="fail if any input is invalid (default), only if all are, or never",
    )


class _ProgressBar:
    """A one-line progress bar on a terminal's stderr; silent elsewhere."""

    def __init__(self, total: int, stream: TextIO) -> None:
        self.total = total
        self.stream = stream
        self.last = 0.0
        self.closed = False

    def __call__(self, done: int) -> None:
        now = time.monotonic()
        if now - self.last < 0.1 and done < self.total:
            return
        self.last = now
        width = 30
        filled = width * done // max(self.total, 1)
        bar = "#" * filled + "-" * (width - filled)
        self.stream.write(f"\rmerging [{bar}] {done}/{self.total}")
        self.stream.flush()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.stream.write("\r\x1b[K")
        self.stream.flush()


def run_merge(args: argparse.Namespace) -> int:
    """The ``merge`` handler (SIGTERM tears the merge down cleanly)."""
    with profdata_scale.sigterm_unwinds():
        return _run_merge(args)


def _run_merge(args: argparse.Namespace) -> int:
    """Flags → :class:`MergeRequest` → :func:`merge_inputs`; print what it reports."""
    import dataclasses

    from profkit._atomic import write_stdout
    from profkit.formats.instrprof.merge.files import MergeInput
    from profkit.formats.instrprof.merge.request import MergeRequest, merge_inputs

    request = MergeRequest(
        inputs=[MergeInput(path, weight) for path, weight in gather_inputs(args)],
        output=args.output,
        text=args.text,
        indexed_version=args.indexed_version,
        llvm_default=args.llvm_default,
        llvm_version=args.llvm_version,
        sparse=args.sparse,
        function=args.function,
        no_function=args.no_function,
        jobs=args.num_threads,
        failure_mode=args.failure_mode,
        trace_reservoir_size=args.temporal_profile_trace_reservoir_size,
        max_trace_length=args.temporal_profile_max_trace_length,
        dask=args.dask,
    )
    request.check()
    profdata_scale.check_options(args)
    request = dataclasses.replace(request, binary=profdata_scale.correlation(args))
    bar = _ProgressBar(len(request.inputs), sys.stderr) if sys.stderr.isatty() else None

    def on_merged(outcome: Any) -> None:
        if bar is not None:
            bar.close()
        _report_failures(args, outcome)

    try:
        result = merge_inputs(request, progress=bar, on_merged=on_merged, on_filtered=_say_filtered)
    finally:
        if bar is not None:
            bar.close()
    if result.data is not None:
        write_stdout(result.data)  # checked: a full disk is an error, not a short file
    if result.chosen is not None:
        _say_version(result.chosen)
    return 0


def _report_failures(args: argparse.Namespace, outcome: Any) -> None:
    """Warn about each input that could not be merged (and list them for --bad-inputs)."""
    profdata_scale.report_warnings(outcome.warnings, outcome.profile, args.show_mismatched)
    for path, message in outcome.failures:
        shown = message if message.startswith(path) else f"{path}: {message}"
        print(f"profkit: warning: {shown}", file=sys.stderr)
    if args.bad_inputs:
        profdata_scale.write_bad_inputs(args.bad_inputs, outcome.failures)


def _say_version(choice: Any) -> None:
    """Which indexed version the default chose, and why (once it is written)."""
    print(
        f"profkit: note: wrote indexed v{choice.version}: {choice.reason} "
        "(--indexed-version N or --llvm-version N to choose; --llvm-default for v13 "
        "as llvm-profdata writes)",
        file=sys.stderr,
    )


def _say_filtered(removed: int, total: int) -> None:
    # llvm-profdata prints this note to stdout; we keep stdout for "-o -".
    print(
        f"{removed} of {total} functions in the original profile are filtered.",
        file=sys.stderr,
    )
