"""`profkit profdata`: LLVM instrumentation profiles — `show` here, `merge`/`overlap` next door.

Options follow ``llvm-profdata show`` (LLVM 22 spelling; ``--show-binary-ids`` is an
alias of ``--binary-ids``) so scripts can switch tools by changing the command name.
Readers are imported only when a subcommand runs.
"""

from __future__ import annotations

import argparse
import gc
import sys
from typing import Any

from profkit.errors import UsageError
from profkit.formats.instrprof.versions import NEWEST_REPRODUCED


def register(sub: Any, name: str, help_text: str) -> None:
    """Add the ``profdata`` parser (with its own subcommands) to the ``profkit`` subparsers."""
    parser = sub.add_parser(name, help=help_text, description=help_text)
    inner = parser.add_subparsers(
        dest="profdata_command", metavar="SUBCOMMAND", parser_class=type(parser)
    )
    _register_show(inner)
    from profkit.cli import profdata_merge, profdata_overlap

    profdata_merge.register(inner)
    profdata_overlap.register(inner)
    parser.set_defaults(handler=lambda args: _no_subcommand(parser))


def _no_subcommand(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2


def _register_show(sub: Any) -> None:
    p = sub.add_parser(
        "show",
        help="print a profile like `llvm-profdata show` (raw, indexed or text input)",
        description="Show an LLVM instrumentation profile (.profraw, .profdata or .proftext). "
        "Output matches `llvm-profdata show` of LLVM 22 for the same options.",
    )
    p.add_argument("file", help="profile to show")
    a = p.add_argument
    a("--all-functions", action="store_true", help="details for each and every function")
    a("--counts", action="store_true", help="show counter values for shown functions")
    a("--function", default="", metavar="SUBSTRING", help="show functions whose name contains this")
    a(
        "--topn",
        type=int,
        default=0,
        metavar="N",
        help="list the N functions with the largest counts",
    )
    a("--detailed-summary", action="store_true", help="show the detailed profile summary")
    a(
        "--detailed-summary-cutoffs",
        default="",
        metavar="C1,C2,...",
        help="cutoffs (parts per million) for the detailed summary",
    )
    a("--ic-targets", action="store_true", help="show indirect call targets of shown functions")
    a("--memop-sizes", action="store_true", help="show profiled mem-op sizes of shown functions")
    a("--show-vtables", action="store_true", help="show vtable targets of shown functions")
    a(
        "--binary-ids",
        "--show-binary-ids",
        dest="binary_ids",
        action="store_true",
        help="show the binary IDs in the profile",
    )
    a("--text", action="store_true", help="dump shown functions in the text format")
    a("--showcs", action="store_true", help="show context-sensitive records instead of plain ones")
    a("--covered", action="store_true", help="list only functions that were executed")
    a("--profile-version", action="store_true", help="show the profile format version")
    a("--temporal-profile-traces", action="store_true", help="show temporal profile traces")
    a("--value-cutoff", type=int, default=0, metavar="N", help="skip functions with max count < N")
    a("--list-below-cutoff", action="store_true", help="list functions below --value-cutoff")
    a(
        "--llvm-version",
        type=int,
        default=NEWEST_REPRODUCED,
        metavar="N",
        help="reproduce the wording of llvm-profdata N (19 or older, or 20+; "
        f"default {NEWEST_REPRODUCED})",
    )
    from profkit.cli import profdata_spelling

    profdata_spelling.add_kind_option(p)
    a("--json", action="store_true", help="profkit's JSON output instead of llvm-profdata's text")
    from profkit.cli import profdata_scale

    profdata_scale.add_correlation_options(p)
    a("-o", "--output", default=None, help="write to this file instead of standard output")
    p.set_defaults(handler=_show)


def _cutoffs(text: str) -> list[int]:
    if not text:
        return []
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"--detailed-summary-cutoffs: not a list of integers: {text!r}") from None
    if any(not 0 <= v <= 999999 for v in values):
        raise UsageError("--detailed-summary-cutoffs: each cutoff must be in 0..999999")
    return values


def _read(args: argparse.Namespace) -> Any:
    """The profile to show: read as is, or joined with its binary (``--binary-file``,
    ``--debug-info``)."""
    from profkit.cli.profdata_scale import correlation
    from profkit.formats.instrprof.reader import read_profile, read_profile_bytes

    binary = correlation(args)
    if binary is None:
        return read_profile(args.file)
    from profkit.formats.instrprof.correlate import correlate
    from profkit.formats.instrprof.raw_sections import written_for_correlation

    data = read_profile_bytes(args.file)
    if not written_for_correlation(data):
        from profkit.formats.instrprof.reader import parse_profile

        return parse_profile(data, args.file)  # (the binary is not needed: as llvm-profdata)
    return correlate(data, args.file, binary.path, binary.mode)


def _show(args: argparse.Namespace) -> int:
    from profkit.present.instrprof.llvm_show import ShowOptions, show_text

    if args.topn < 0 or args.value_cutoff < 0:
        raise UsageError("--topn and --value-cutoff must not be negative")
    opts = ShowOptions(
        all_functions=args.all_functions,
        counts=args.counts,
        function=args.function,
        topn=args.topn,
        detailed_summary=args.detailed_summary,
        detailed_summary_cutoffs=_cutoffs(args.detailed_summary_cutoffs),
        ic_targets=args.ic_targets,
        memop_sizes=args.memop_sizes,
        show_vtables=args.show_vtables,
        binary_ids=args.binary_ids,
        text=args.text,
        showcs=args.showcs,
        covered=args.covered,
        profile_version=args.profile_version,
        temporal_traces=args.temporal_profile_traces,
        value_cutoff=args.value_cutoff,
        list_below_cutoff=args.list_below_cutoff,
        llvm_version=args.llvm_version,
    )
    if args.output:
        # tempfile (for atomic writes) costs ~2 ms of start-up: only with -o.
        from profkit._atomic import ensure_not_an_input

        ensure_not_an_input(args.output, [args.file])
    # Reading and formatting allocate a few objects per function and no cycles; the
    # collector would only re-walk them (~7% of `show` on a 20,000-function file).
    collecting = gc.isenabled()
    gc.disable()
    try:
        try:
            profile = _read(args)
        except OSError as exc:
            raise UsageError(f"{args.file}: {exc.strerror or exc}") from None
        for note in profile.notes:
            print(f"profkit: note: {args.file}: {note}", file=sys.stderr)
        if args.json:
            from profkit.present.instrprof.json_show import show_json

            text = show_json(profile, opts)
        else:
            text = show_text(profile, opts)
    finally:
        if collecting:
            gc.enable()
    if args.output:
        from profkit._atomic import write_atomic, write_errors

        with write_errors(f"cannot write {args.output}: "):
            write_atomic(args.output, text.encode("utf-8", "surrogateescape"))
    else:
        from profkit._atomic import write_stdout

        # Names are bytes in the file; undecodable ones travel as surrogate escapes and
        # are written back as the original bytes, as llvm-profdata would print them.
        write_stdout(text.encode("utf-8", "surrogateescape"))
    return 0
