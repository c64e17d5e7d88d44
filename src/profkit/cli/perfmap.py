"""``profkit perfmap``: show, lookup, convert, symbolize and verify perf maps.

Thin glue over :mod:`profkit.formats.perfmap`: parse arguments, call the library, format
the answer. Bad input raises a ProfkitError subclass, which ``profkit`` prints as one
line with exit status 2; ``verify`` returns 1 for a well-formed pair that does not match.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

import numpy as np

from profkit._atomic import write_stdout
from profkit.cli.perfmap_common import (
    add_r2rmap,
    base_files,
    base_resolver,
    load_any_map,
    refuse_overwrite,
    say,
    warn_skipped,
)
from profkit.cli.perfmap_image import run_from_image, run_verify
from profkit.cli.perfmap_symbolize import run_symbolize
from profkit.errors import PerfMapFormatError, UsageError
from profkit.formats.perfmap._io import read_input, write_atomic
from profkit.formats.perfmap.bases import parse_address
from profkit.formats.perfmap.concat import PlacedMap, concat_maps, place_r2rmap, short_names
from profkit.formats.perfmap.pe import read_pe
from profkit.formats.perfmap.perfinfo import read_perfinfo
from profkit.formats.perfmap.perfpid import read_perf_map
from profkit.formats.perfmap.r2rmap import R2RPerfMap, parse_r2rmap_file_name, read_r2rmap
from profkit.formats.perfmap.sniff import sniff
from profkit.formats.perfmap.summary import (
    describe_image,
    describe_perf_map,
    describe_perfinfo,
    describe_r2rmap,
    symbol_server_key,
    text_lines,
)
from profkit.formats.perfmap.symbolizer import Symbolizer
from profkit.formats.r2r import NotReadyToRunError, describe_r2r, read_r2r_image

NOT_FOUND = "[unknown]"


def register(sub: Any, name: str, help_text: str) -> None:
    """Add the ``perfmap`` parser and its actions to the ``profkit`` subparsers."""
    parser = sub.add_parser(name, help=help_text, description=help_text)
    actions = parser.add_subparsers(
        dest="perfmap_action", metavar="ACTION", required=True, parser_class=type(parser)
    )

    p = actions.add_parser("show", help="decode a map's header and summarize its entries")
    p.add_argument("file", help="an .r2rmap, perf-PID.map, perfinfo-PID.map or R2R image")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    _lenient(p)
    p.set_defaults(handler=_show)

    p = actions.add_parser("lookup", help="resolve addresses to name+0xOFFSET")
    p.add_argument("map", help="an .r2rmap (RVAs unless --base) or a perf-PID.map")
    p.add_argument("addresses", nargs="+", metavar="ADDR", help="hex, with or without 0x")
    p.add_argument("--base", help="load base of the r2rmap's image (hex)")
    _lenient(p)
    p.set_defaults(handler=_lookup)

    p = actions.add_parser("convert", help="r2rmap(s) + load base → perf-PID.map lines")
    p.add_argument("maps", nargs="+", metavar="R2RMAP")
    p.add_argument("-o", "--output", required=True, help="perf map to write ('-' = stdout)")
    p.add_argument("--append", action="store_true", help="add to the existing output map")
    p.add_argument(
        "--assembly-prefix", action="store_true",
        help="prefix names with '[<assembly>] ' like the runtime's own perf map",
    )  # fmt: skip
    _base_options(p)
    _lenient(p)
    p.set_defaults(handler=_convert)

    p = actions.add_parser("symbolize", help="fill [unknown] frames of `perf script` output")
    p.add_argument("input", nargs="?", default="-", help="perf script text (default stdin)")
    p.add_argument("--map", action="append", default=[], dest="maps", metavar="MAP")
    p.add_argument("-o", "--output", default="-", help="where to write (default stdout)")
    p.add_argument("--no-offset", action="store_true", help="write names without +0xOFFSET")
    p.add_argument("--stats", action="store_true", help="print a count summary to stderr")
    p.add_argument(
        "--no-image-maps", action="store_true",
        help="do not build maps from the R2R images named in perfinfo, MMAP events or frames",
    )  # fmt: skip
    _cache_options(p)
    _base_options(p)
    _lenient(p)
    p.set_defaults(handler=run_symbolize)

    p = actions.add_parser(
        "from-image", help="build the r2rmap crossgen2 --perfmap writes, from an R2R image"
    )
    p.add_argument("image", help="the ReadyToRun image (.dll)")
    p.add_argument("-o", "--output", required=True, help="the .ni.r2rmap to write ('-' = stdout)")
    p.set_defaults(handler=run_from_image)

    p = actions.add_parser("verify", help="check that a map belongs to an R2R image")
    p.add_argument("image", help="the R2R image (.dll)")
    p.add_argument("map", help="the .r2rmap")
    p.set_defaults(handler=run_verify)


def _cache_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--cache-dir", metavar="DIR",
        help="where maps built from images are kept (default $XDG_CACHE_HOME/profkit/r2r)",
    )  # fmt: skip
    p.add_argument("--no-cache", action="store_true", help="build image maps in memory only")


def _lenient(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--lenient", action="store_true",
        help="skip malformed map lines (counted on stderr) instead of failing",
    )  # fmt: skip


def _base_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--base", action="append", default=[], metavar="[NAME=]ADDR",
        help="image load base for an r2rmap; NAME=ADDR when there are several",
    )  # fmt: skip
    p.add_argument("--perfinfo", action="append", default=[], metavar="FILE",
                   help="take bases from a .NET perfinfo-PID.map")  # fmt: skip
    p.add_argument("--proc-maps", action="append", default=[], metavar="FILE",
                   help="take bases from saved /proc/PID/maps text")  # fmt: skip
    p.add_argument(
        "--mmap-events", action="append", default=[], metavar="FILE",
        help="take bases from the MMAP events of `perf script --show-mmap-events` "
        "output (reads each mapped image's section table)",
    )  # fmt: skip
    p.add_argument(
        "--image-dir", action="append", default=[], metavar="DIR",
        help="look for images named in MMAP events here first",
    )  # fmt: skip


def _show(args: argparse.Namespace) -> int:
    data = read_input(args.file, PerfMapFormatError)
    strict = not args.lenient
    info: dict[str, Any]
    kind = sniff(data, args.file)
    if kind == "image":
        info = describe_image(read_pe(data, path=args.file))
        try:
            info["readytorun"] = describe_r2r(read_r2r_image(data, path=args.file))
        except NotReadyToRunError:
            info["readytorun"] = None
    elif kind == "perfinfo":
        info = describe_perfinfo(read_perfinfo(data, path=args.file, strict=strict))
    elif kind == "r2rmap":
        m = read_r2rmap(data, path=args.file, strict=strict)
        info = describe_r2rmap(m)
        info["symbol_server_key"] = symbol_server_key(m, args.file)
    else:
        info = describe_perf_map(read_perf_map(data, path=args.file, strict=strict))
    info = {"file": args.file, **info}
    if args.json:  # JSON keeps names as they are (json escapes control characters)
        write_stdout((json.dumps(info, indent=2) + "\n").encode("utf-8", "backslashreplace"))
    else:
        say(text_lines(info))
    return 0


def _lookup(args: argparse.Namespace) -> int:
    addresses = [parse_address(a) for a in args.addresses]
    m = load_any_map(args.map, args.lenient)
    sym = Symbolizer()
    if isinstance(m, R2RPerfMap):
        add_r2rmap(sym, m, parse_address(args.base, "base") if args.base else 0, args.map)
    elif args.base:
        raise UsageError(f"{args.map}: --base applies to r2rmaps; a perf map holds addresses")
    else:
        sym.add_perf_map(m, args.map)
    batch = sym.lookup_many(np.array(addresses, dtype=np.uint64))
    out = []
    for addr, s in zip(addresses, sym.symbols(batch), strict=True):
        out.append(f"0x{addr:x} {s.label() if s is not None else NOT_FOUND}")
    say(out)
    return 0


def _convert(args: argparse.Namespace) -> int:
    out = args.output
    refuse_overwrite(out, [*args.maps, *base_files(args)])
    resolver = base_resolver(args, args.maps)
    placed: list[PlacedMap] = []
    for path in args.maps:
        data = read_input(path, PerfMapFormatError)
        m = read_r2rmap(data, path=path, strict=not args.lenient)
        warn_skipped(path, m.skipped)
        base, _ = resolver.base_for(path, only_map=len(args.maps) == 1)
        prefix = f"[{_assembly(path)}] " if args.assembly_prefix else ""
        placed.append(place_r2rmap(m, base, path, prefix))
    existing = b""
    # only a regular file has lines to keep: reading a FIFO or /dev/stdout would block
    if args.append and out != "-" and os.path.isfile(out):
        existing = read_input(out, PerfMapFormatError)
    short = short_names(placed)
    if short:
        print(
            f"profkit: warning: {short} name(s) shorter than 3 characters; perf ignores such lines",
            file=sys.stderr,
        )
    data = concat_maps(placed, existing, out)
    if out == "-":
        write_stdout(data)
    else:
        write_atomic(out, data)
    entries = sum(len(p.names) for p in placed)
    print(f"profkit: wrote {entries} entries to {'stdout' if out == '-' else out}", file=sys.stderr)
    return 0


def _assembly(path: str) -> str:
    parsed = parse_r2rmap_file_name(path)
    return parsed.base if parsed else os.path.basename(path)
