"""`profkit profdata overlap` (llvm-profdata's options and wording).

Why a module of its own: overlap is a separate command from merge, sharing only the
table of LLVM releases (:mod:`profkit.formats.instrprof.versions`); thin like every command: read two profiles, call
:mod:`~profkit.formats.instrprof.overlap_calc`, print :mod:`profkit.present.instrprof`'s
text. Readers load in the handler (``show`` imports this module too).
"""

from __future__ import annotations

import argparse
from typing import Any

from profkit.cli import profdata_spelling
from profkit.formats.instrprof.versions import NEWEST_REPRODUCED, REPRODUCED_RELEASES


def register(sub: Any) -> None:
    """Add ``overlap`` to the ``profkit profdata`` subparsers."""
    help_text = "show how much two profiles overlap (llvm-profdata overlap)"
    p = sub.add_parser("overlap", help=help_text, description=help_text)
    p.add_argument("base", help="the base profile")
    p.add_argument("test", help="the test profile")
    p.add_argument(
        "--function", metavar="SUBSTRING", help="show per-function overlap for matching names"
    )
    p.add_argument(
        "--value-cutoff",
        type=int,
        default=-1,
        metavar="N",
        help="show per-function overlap for functions whose max count is at least N",
    )
    profdata_spelling.add_kind_option(p)
    p.add_argument("--cs", action="store_true", help="compare the context-sensitive records")
    p.add_argument("-o", "--output", help="write the report here instead of stdout")
    p.add_argument(
        "--llvm-version",
        type=int,
        choices=sorted(REPRODUCED_RELEASES),
        default=NEWEST_REPRODUCED,
        help="print exactly as llvm-profdata-N does (14-19 spell 'infomation')",
    )
    p.set_defaults(handler=run_overlap)


def run_overlap(args: argparse.Namespace) -> int:
    """The ``overlap`` handler."""
    from profkit._atomic import ensure_not_an_input, write_atomic, write_errors, write_stdout
    from profkit.formats.instrprof.overlap_calc import overlap
    from profkit.formats.instrprof.reader import read_profile
    from profkit.present.instrprof.llvm_overlap import format_overlap

    if args.output:
        ensure_not_an_input(args.output, [args.base, args.test])
    base = read_profile(args.base)
    test = read_profile(args.test)
    result = overlap(base, test, cs=args.cs, function=args.function, value_cutoff=args.value_cutoff)
    text = format_overlap(result, args.base, args.test, llvm_version=args.llvm_version)
    if args.output:
        with write_errors(f"cannot write {args.output}: "):
            write_atomic(args.output, text.encode("utf-8", "surrogateescape"))
    else:
        write_stdout(text.encode("utf-8", "surrogateescape"))
    return 0
