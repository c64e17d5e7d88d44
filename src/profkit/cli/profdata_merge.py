"""`profkit profdata merge` (llvm-profdata's options).

Thin: gather the inputs (:mod:`.profdata_inputs`), call
:mod:`profkit.formats.instrprof.merge.files` (or the Dask scale-out of
:mod:`.profdata_scale`), write the result; ``overlap`` is :mod:`.profdata_overlap`.
Bad input is a :class:`ProfkitError` (one line, exit status 2); per-input problems are
warnings on stderr, one line each, naming the file.

Imported by ``profkit profdata show`` too (argparse needs every subparser), so module
level imports stay minimal; readers, writers and file helpers load in the handlers.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from typing import Any, TextIO

from profkit.cli import profdata_scale, profdata_spelling
from profkit.cli.profdata_inputs import gather_inputs
from profkit.errors import ProfkitError, UsageError

#: llvm-profdata release → the indexed version its `merge` writes.
LLVM_INDEXED_VERSION = {14: 7, 16: 9, 19: 12, 22: 13}


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
        self.stream.write("\r\x1b[K")
        self.stream.flush()


def _llvm_release(llvm_version: int | None, indexed_version: int | None) -> int:
    """The LLVM release whose merge order to imitate (hash-map iteration orders differ)."""
    if llvm_version is not None:
        return llvm_version
    by_indexed = {7: 14, 8: 14, 9: 16}
    return by_indexed.get(indexed_version or 13, 22)


def run_merge(args: argparse.Namespace) -> int:
    """The ``merge`` handler (SIGTERM tears the merge down cleanly)."""
    with profdata_scale.sigterm_unwinds():
        return _run_merge(args)


def _run_merge(args: argparse.Namespace) -> int:
    from profkit._atomic import ensure_not_an_input
    from profkit.formats.instrprof.merge import drop_all_zero
    from profkit.formats.instrprof.merge.files import MergeInput, default_jobs
    from profkit.formats.instrprof.text_writer import NEWEST_DIALECT

    inputs = [MergeInput(path, weight) for path, weight in gather_inputs(args)]
    ensure_not_an_input(args.output, [i.path for i in inputs])
    if args.temporal_profile_trace_reservoir_size < 1 or args.temporal_profile_max_trace_length < 1:
        raise UsageError("temporal profile limits must be at least 1")
    if args.num_threads < 0:
        raise UsageError("-j/--num-threads must be 0 (automatic) or more")
    jobs = args.num_threads or default_jobs(len(inputs))
    version = args.indexed_version
    dialect = NEWEST_DIALECT
    if args.llvm_version is not None:
        dialect = args.llvm_version
        if version is None:
            version = LLVM_INDEXED_VERSION[args.llvm_version]
    outcome = _merge(args, inputs, jobs, version)
    chosen = None
    if version is None and not args.text and not args.llvm_default:
        from profkit.formats.instrprof.compat import readable_version

        chosen = readable_version(outcome.input_versions, outcome.profile)
        version = chosen.version
    _report_failures(args, outcome, len(inputs))
    _filter_functions(outcome.profile, args.function, args.no_function)
    if args.text and args.sparse:
        drop_all_zero(outcome.profile)
    _write(args, outcome.profile, version, dialect)
    if chosen is not None:
        _say_version(chosen)
    return 0


def _merge(args: argparse.Namespace, inputs: list[Any], jobs: int, version: int | None) -> Any:
    """Merge ``inputs`` here or on Dask, with a progress bar on a terminal."""
    from profkit.formats.instrprof.merge.files import merge_files

    bar = _ProgressBar(len(inputs), sys.stderr) if sys.stderr.isatty() else None
    profdata_scale.check_options(args)
    try:
        if args.dask:
            return profdata_scale.run_dask(args, inputs, jobs, bar)
        return merge_files(
            inputs,
            jobs=jobs,
            # --sparse is applied by the writers: LLVM ≤ 16 order names before dropping.
            sparse=False,
            progress=bar,
            trace_reservoir_size=args.temporal_profile_trace_reservoir_size,
            max_trace_length=args.temporal_profile_max_trace_length,
            llvm_contexts=jobs,  # as llvm-profdata -j N: N writers merged pairwise
            llvm_version=_llvm_release(args.llvm_version, version),
            binary=profdata_scale.correlation(args),
        )
    finally:
        if bar is not None:
            bar.close()


def _report_failures(args: argparse.Namespace, outcome: Any, n_inputs: int) -> None:
    """Warn about each input that could not be merged; raise if ``--failure-mode`` says so."""
    profdata_scale.report_warnings(outcome.warnings, outcome.profile, args.show_mismatched)
    for path, message in outcome.failures:
        shown = message if message.startswith(path) else f"{path}: {message}"
        print(f"profkit: warning: {shown}", file=sys.stderr)
    if args.bad_inputs:
        profdata_scale.write_bad_inputs(args.bad_inputs, outcome.failures)
    failed = len(outcome.failures)
    if failed and (
        args.failure_mode == "any" or (args.failure_mode == "all" and not outcome.merged)
    ):
        raise ProfkitError(
            f"{failed} of {n_inputs} input(s) could not be merged "
            f"(--failure-mode={args.failure_mode}); first: {outcome.failures[0][0]}"
        )


def _write(args: argparse.Namespace, profile: Any, version: int | None, dialect: int) -> None:
    """Write the merged profile: atomically to ``-o FILE``, or to stdout for ``-o -``."""
    from profkit._atomic import write_errors, write_stdout
    from profkit.formats.instrprof.indexed_writer import build_indexed, write_indexed
    from profkit.formats.instrprof.text_writer import format_text, write_text

    if args.output == "-":  # like llvm-profdata: "-o -" writes to stdout
        if args.text:
            data = format_text(profile, llvm_version=dialect).encode("utf-8", "surrogateescape")
        else:
            data = build_indexed(profile, version, sparse=args.sparse)
        write_stdout(data)  # checked: a full disk is an error, not a short file
    else:
        with write_errors(f"cannot write {args.output}: "):
            if args.text:
                write_text(profile, args.output, llvm_version=dialect)
            else:
                write_indexed(profile, args.output, version, sparse=args.sparse)


def _say_version(choice: Any) -> None:
    """Which indexed version the default chose, and why (once it is written)."""
    print(
        f"profkit: note: wrote indexed v{choice.version}: {choice.reason} "
        "(--indexed-version N or --llvm-version N to choose; --llvm-default for v13 "
        "as llvm-profdata writes)",
        file=sys.stderr,
    )


def _filter_functions(profile: Any, keep: str | None, drop: str | None) -> None:
    """``--function`` / ``--no-function``: regex *search* on names, as LLVM's Regex::match."""
    if keep is None and drop is None:
        return
    try:
        keep_re = re.compile(keep) if keep is not None else None
        drop_re = re.compile(drop) if drop is not None else None
    except re.error as exc:
        raise UsageError(f"bad --function/--no-function regex: {exc}") from None
    names = {r.name for r in profile.records}
    profile.records = [
        r
        for r in profile.records
        if (keep_re is None or keep_re.search(r.name)) and not (drop_re and drop_re.search(r.name))
    ]
    kept = {r.name for r in profile.records}
    # llvm-profdata prints this note to stdout; we keep stdout for "-o -".
    print(
        f"{len(names) - len(kept)} of {len(names)} functions in the original profile are filtered.",
        file=sys.stderr,
    )
