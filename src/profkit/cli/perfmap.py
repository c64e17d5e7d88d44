"""``profkit perfmap``: show, lookup, convert, symbolize and verify perf maps.

Thin glue over :mod:`profkit.formats.perfmap`: parse arguments, call the library, format
the answer. Bad input raises a ProfkitError subclass, which ``profkit`` prints as one
line with exit status 2; ``verify`` returns 1 for a well-formed pair that does not match.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from typing import Any

import numpy as np

from profkit._atomic import refuse_input_as_output
from profkit._text import MAX_MESSAGE_CHARS, escape
from profkit.errors import FormatError, PerfMapFormatError, UsageError
from profkit.formats.perfmap._io import (
    atomic_output,
    iter_lines,
    open_stream,
    read_input,
    write_atomic,
    write_stdout,
)
from profkit.formats.perfmap._lines import PERF_STYLE, render_lines
from profkit.formats.perfmap.bases import BaseResolver, map_stem, parse_address
from profkit.formats.perfmap.mmapevents import image_base, image_finder, load_mmap_events
from profkit.formats.perfmap.pe import read_pe
from profkit.formats.perfmap.perfinfo import load_perfinfo, read_perfinfo
from profkit.formats.perfmap.perfpid import PerfMap, read_perf_map
from profkit.formats.perfmap.perfscript import ImageFinder, SymbolizeStats, symbolize_stream
from profkit.formats.perfmap.procmaps import image_stem, load_proc_maps
from profkit.formats.perfmap.r2rmap import (
    R2RPerfMap,
    looks_like_r2rmap,
    parse_r2rmap_file_name,
    read_r2rmap,
    write_r2rmap,
)
from profkit.formats.perfmap.signature import verify_map
from profkit.formats.perfmap.summary import (
    describe_image,
    describe_perf_map,
    describe_perfinfo,
    describe_r2rmap,
    symbol_server_key,
    text_lines,
)
from profkit.formats.perfmap.symbolizer import Symbolizer
from profkit.formats.r2r import (
    NotReadyToRunError,
    build_r2rmap,
    describe_r2r,
    image_signature,
    load_r2r_image,
    read_r2r_image,
)
from profkit.formats.r2r.imagemaps import ImageMaps, ImageTable, default_cache_dir

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
    p.set_defaults(handler=_symbolize)

    p = actions.add_parser(
        "from-image", help="build the r2rmap crossgen2 --perfmap writes, from an R2R image"
    )
    p.add_argument("image", help="the ReadyToRun image (.dll)")
    p.add_argument("-o", "--output", required=True, help="the .ni.r2rmap to write ('-' = stdout)")
    p.set_defaults(handler=_from_image)

    p = actions.add_parser("verify", help="check that a map belongs to an R2R image")
    p.add_argument("image", help="the R2R image (.dll)")
    p.add_argument("map", help="the .r2rmap")
    p.set_defaults(handler=_verify)


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


# -- loading ------------------------------------------------------------------------------


def _load_any_map(path: str, lenient: bool) -> R2RPerfMap | PerfMap:
    """An r2rmap (by header or file name) or else a perf map."""
    data = read_input(path, PerfMapFormatError)
    m: R2RPerfMap | PerfMap
    if looks_like_r2rmap(data, path):
        m = read_r2rmap(data, path=path, strict=not lenient)
    else:
        m = read_perf_map(data, path=path, strict=not lenient)
    _warn_skipped(path, m.skipped)
    return m


def _warn_skipped(path: str, skipped: list[tuple[int, str]]) -> None:
    if skipped:
        line, why = skipped[0]
        print(
            escape(
                f"profkit: warning: {path}: skipped {len(skipped)} malformed line(s); "
                f"first: line {line}: {why}",
                MAX_MESSAGE_CHARS,
            ),
            file=sys.stderr,
        )


def _resolver(args: argparse.Namespace, map_paths: list[str]) -> BaseResolver:
    resolver = BaseResolver()
    for text in args.base:
        resolver.add_option(text)
    for path in args.perfinfo:
        resolver.add_perfinfo(load_perfinfo(path, strict=not args.lenient), path)
    for path in args.proc_maps:
        resolver.add_proc_maps(load_proc_maps(path, strict=not args.lenient), path)
    if args.mmap_events:
        wanted = {map_stem(p) for p in map_paths}
        find = image_finder(args.image_dir)
        for path in args.mmap_events:
            resolver.add_mmap_events(load_mmap_events(path), find, wanted, path)
    return resolver


def _symbolizer(
    args: argparse.Namespace, paths: list[str], images: ImageMaps | None = None
) -> Symbolizer:
    resolver = _resolver(args, paths)
    sym = Symbolizer()
    loaded = [(p, _load_any_map(p, args.lenient)) for p in paths]
    n_r2r = sum(isinstance(m, R2RPerfMap) for _, m in loaded)
    for path, m in loaded:
        if isinstance(m, R2RPerfMap):
            base, _ = resolver.base_for(path, only_map=n_r2r == 1)
            _add_r2rmap(sym, m, base, path)
            if images is not None:
                images.given[map_stem(path)] = m
        else:
            sym.add_perf_map(m, path)
    if images is not None:
        _add_image_maps(args, sym, images, {map_stem(p) for p, m in loaded
                                            if isinstance(m, R2RPerfMap)})  # fmt: skip
    return sym


def _image_bases(args: argparse.Namespace) -> dict[str, set[int]]:
    """Image path → load bases named by --perfinfo and --mmap-events."""
    bases: dict[str, set[int]] = {}
    for path in args.perfinfo:
        for record in load_perfinfo(path, strict=not args.lenient).image_loads():
            if record.base:
                bases.setdefault(record.path, set()).add(record.base)
    if args.mmap_events:
        find = image_finder(args.image_dir)
        for path in args.mmap_events:
            for event in load_mmap_events(path):
                if "x" not in event.prot or not event.path.startswith("/"):
                    continue
                pe = find(event.path)
                base = image_base(event, pe) if pe is not None else None
                if base is not None:
                    bases.setdefault(event.path, set()).add(base)
    return bases


def _add_image_maps(
    args: argparse.Namespace, sym: Symbolizer, images: ImageMaps, covered: set[str]
) -> None:
    """Build (or take from the cache) the map of every R2R image perfinfo or the MMAP
    events name, and place it at its base, unless a --map already covers it."""
    for path, bases in sorted(_image_bases(args).items()):
        if len(bases) > 1:  # several processes: only DSO-relative frames can be named
            shown = ", ".join(f"{b:#x}" for b in sorted(bases))
            line = (
                f"profkit: warning: {path}: loaded at several bases ({shown}); absolute "
                "addresses in it stay unknown (select one process with perf script --pid)"
            )
            print(escape(line, MAX_MESSAGE_CHARS), file=sys.stderr)
            continue
        (base,) = bases
        images.add_base(path, base)
        if image_stem(path) in covered:
            continue
        table = _image_table(images, path, args.lenient)
        if table is not None:
            sym.add_r2rmap(_table_map(table), base, path)


def _table_map(table: ImageTable) -> R2RPerfMap:
    return table.perfmap


def _add_r2rmap(sym: Symbolizer, m: R2RPerfMap, base: int, path: str) -> None:
    try:
        sym.add_r2rmap(m, base, path)
    except ValueError as exc:  # a base that pushes the map past 2**64
        raise UsageError(f"{path}: {exc}") from None


def _refuse_overwrite(output: str, inputs: list[str]) -> None:
    clash = refuse_input_as_output(output, inputs)
    if clash is not None:
        raise UsageError(
            f"{output}: the output is one of the inputs ({clash}); inputs are never modified"
        )


# -- actions ------------------------------------------------------------------------------


def _show(args: argparse.Namespace) -> int:
    data = read_input(args.file, PerfMapFormatError)
    strict = not args.lenient
    info: dict[str, Any]
    if data[:2] == b"MZ":
        info = describe_image(read_pe(data, path=args.file))
        try:
            info["readytorun"] = describe_r2r(read_r2r_image(data, path=args.file))
        except NotReadyToRunError:
            info["readytorun"] = None
    elif data.startswith(b"ImageLoad;") or os.path.basename(args.file).startswith("perfinfo-"):
        info = describe_perfinfo(read_perfinfo(data, path=args.file, strict=strict))
    elif looks_like_r2rmap(data, args.file):
        m = read_r2rmap(data, path=args.file, strict=strict)
        info = describe_r2rmap(m)
        info["symbol_server_key"] = symbol_server_key(m, args.file)
    else:
        info = describe_perf_map(read_perf_map(data, path=args.file, strict=strict))
    info = {"file": args.file, **info}
    if args.json:  # JSON keeps names as they are (json escapes control characters)
        write_stdout((json.dumps(info, indent=2) + "\n").encode("utf-8", "backslashreplace"))
    else:
        _say(text_lines(info))
    return 0


def _say(lines: list[str]) -> None:
    """Print lines to stdout through :func:`write_stdout` (errors reported, not lost),
    control characters from map names escaped (:func:`profkit._text.escape`)."""
    text = "\n".join(escape(line) for line in lines) + "\n"
    write_stdout(text.encode("utf-8", "backslashreplace"))


def _lookup(args: argparse.Namespace) -> int:
    addresses = [parse_address(a) for a in args.addresses]
    m = _load_any_map(args.map, args.lenient)
    sym = Symbolizer()
    if isinstance(m, R2RPerfMap):
        _add_r2rmap(sym, m, parse_address(args.base, "base") if args.base else 0, args.map)
    elif args.base:
        raise UsageError(f"{args.map}: --base applies to r2rmaps; a perf map holds addresses")
    else:
        sym.add_perf_map(m, args.map)
    batch = sym.lookup_many(np.array(addresses, dtype=np.uint64))
    out = []
    for addr, s in zip(addresses, sym.symbols(batch), strict=True):
        out.append(f"0x{addr:x} {s.label() if s is not None else NOT_FOUND}")
    _say(out)
    return 0


def _convert(args: argparse.Namespace) -> int:
    out = args.output
    _refuse_overwrite(out, [*args.maps, *_base_files(args)])
    resolver = _resolver(args, args.maps)
    starts: list[np.ndarray] = []
    sizes: list[np.ndarray] = []
    names: list[str] = []
    for path in args.maps:
        data = read_input(path, PerfMapFormatError)
        m = read_r2rmap(data, path=path, strict=not args.lenient)
        _warn_skipped(path, m.skipped)
        base, _ = resolver.base_for(path, only_map=len(args.maps) == 1)
        if len(m) and base + int(m.rvas.max()) >= 1 << 64:
            raise UsageError(f"{path}: base 0x{base:x} puts the map past the 64-bit space")
        starts.append(m.rvas + np.uint64(base))
        sizes.append(m.lengths)
        if args.assembly_prefix:
            prefix = f"[{_assembly(path)}] "
            names.extend(prefix + n for n in m.names)
        else:
            names.extend(m.names)
    all_starts = np.concatenate(starts)
    all_sizes = np.concatenate(sizes)
    existing = b""
    style = PERF_STYLE
    # only a regular file has lines to keep: reading a FIFO or /dev/stdout would block
    if args.append and out != "-" and os.path.isfile(out):
        existing = read_input(out, PerfMapFormatError)
        if existing:
            style = read_perf_map(existing, path=out, strict=False).style
            style = dataclasses.replace(style, final_newline=True)
            if not existing.endswith(b"\n"):
                existing += style.newline.encode()
    short = sum(1 for n in names if len(n) < 3)
    if short:
        print(
            f"profkit: warning: {short} name(s) shorter than 3 characters; perf ignores such lines",
            file=sys.stderr,
        )
    data = existing + render_lines(all_starts, all_sizes, names, style)
    if out == "-":
        write_stdout(data)
    else:
        write_atomic(out, data)
    print(
        f"profkit: wrote {len(names)} entries to {'stdout' if out == '-' else out}", file=sys.stderr
    )
    return 0


def _assembly(path: str) -> str:
    parsed = parse_r2rmap_file_name(path)
    return parsed.base if parsed else os.path.basename(path)


def _base_files(args: argparse.Namespace) -> list[str]:
    """Every file the base options read (outputs must not replace them)."""
    return [*args.perfinfo, *args.proc_maps, *args.mmap_events]


def _symbolize(args: argparse.Namespace) -> int:
    _refuse_overwrite(args.output, [args.input, *args.maps, *_base_files(args)])
    if not args.maps and not args.perfinfo and not args.mmap_events and args.no_image_maps:
        raise UsageError("nothing to symbolize with: give --map, --perfinfo or --mmap-events")
    images = None
    if not args.no_image_maps:
        cache = None if args.no_cache else (args.cache_dir or default_cache_dir())
        images = ImageMaps(cache_dir=cache, image_dirs=args.image_dir)
    sym = _symbolizer(args, args.maps, images)
    stats = SymbolizeStats(per_dso={} if args.stats else None)
    finder = _dso_finder(images, args.lenient) if images is not None else None
    offsets = not args.no_offset
    with open_stream(args.input) as src:
        if args.output == "-":
            for block in symbolize_stream(
                iter_lines(src), sym, stats, offsets=offsets, images=finder
            ):
                write_stdout(block)
        else:
            with atomic_output(args.output) as fh:
                for block in symbolize_stream(
                    iter_lines(src), sym, stats, offsets=offsets, images=finder
                ):
                    fh.write(block)
    if args.stats:
        print(
            f"profkit: {stats.resolved} of {stats.unknown} [unknown] frames named",
            file=sys.stderr,
        )
        for dso, (seen, named) in sorted(
            (stats.per_dso or {}).items(), key=lambda kv: (-(kv[1][0] - kv[1][1]), kv[0])
        ):
            line = f"profkit:   {seen - named} of {seen} still unknown in {dso or '(no dso)'}"
            print(escape(line, MAX_MESSAGE_CHARS), file=sys.stderr)
    return 0


def _verify_without_entry(args: argparse.Namespace, m: R2RPerfMap) -> int:
    """An image built without ``--perfmap`` (every framework image) has no type-21
    entry: recompute the signature crossgen2 would have given it (its input MVIDs and
    target, spec §1.6) and compare that with the map's header."""
    try:
        image = load_r2r_image(args.image)
    except NotReadyToRunError:
        raise FormatError(
            "malformed",
            "no R2R PerfMap debug entry (type 21) (crossgen2 adds it with --perfmap) and no "
            "ReadyToRun header to recompute the signature from",
            path=args.image,
        ) from None
    expected = image_signature(image)
    sig = m.header.signature
    os_token, arch_token, abi_token = image.tokens
    lines = [
        f"image: {args.image} (ReadyToRun {image.version}, {image.architecture}/{image.os}; "
        "no R2R PerfMap debug entry: built without --perfmap)",
        f"  signature recomputed from its MVID(s) and target: {expected.hex().upper()}",
        f"map:   {args.map}",
        f"  header:  v{m.header.version}, signature {sig.hex().upper() if sig else 'none'}",
    ]
    tokens = (m.header.os, m.header.architecture, m.header.abi)
    if tokens != (os_token, arch_token, abi_token):
        lines.append(
            f"note: the map's OS/architecture/ABI tokens {tokens} are not the image's "
            f"{(os_token, arch_token, abi_token)}"
        )
    ok = sig is not None and sig == expected
    if ok:
        lines.append("OK: the map belongs to the image (signatures match)")
    else:
        lines.append("MISMATCH: the map was not generated for this image (signatures differ)")
    _say(lines)
    return 0 if ok else 1


def _dso_finder(images: ImageMaps, lenient: bool) -> ImageFinder:
    """DSO text of a frame → its image's table, for absolute paths of files only."""

    def find(dso: str) -> ImageTable | None:
        if not dso.startswith("/") or dso.endswith(".so") or ".so." in dso:
            return None
        return _image_table(images, dso, lenient)

    return find


def _image_table(images: ImageMaps, path: str, lenient: bool) -> ImageTable | None:
    """The image's table; a damaged image is an error, or with --lenient one warning
    and its frames stay unknown."""
    try:
        return images.table(path)
    except FormatError as exc:
        if not lenient:
            raise
        images.tables[path] = None
        line = f"profkit: warning: {exc}; its frames stay unknown"
        print(escape(line, MAX_MESSAGE_CHARS), file=sys.stderr)
        return None


def _from_image(args: argparse.Namespace) -> int:
    out = args.output
    _refuse_overwrite(out, [args.image])
    image = load_r2r_image(args.image)
    data = write_r2rmap(build_r2rmap(image))
    if out == "-":
        write_stdout(data)
    else:
        write_atomic(out, data)
    n = data.count(b"\n") - 5
    print(
        f"profkit: wrote {n} method entries for {len(image.components)} assembly(ies) "
        f"(ReadyToRun {image.version}, {image.architecture}/{image.os}) to "
        f"{'stdout' if out == '-' else out}",
        file=sys.stderr,
    )
    return 0


def _verify(args: argparse.Namespace) -> int:
    image = read_pe(read_input(args.image, FormatError), path=args.image)
    m = read_r2rmap(read_input(args.map, PerfMapFormatError), path=args.map)
    result = verify_map(image, m, args.map)
    if result is None:
        return _verify_without_entry(args, m)
    sig = result.map_signature.hex().upper() if result.map_signature else "none"
    lines = [
        f"image: {args.image} ({image.machine_description()})",
        f"  expects: {result.image_file_name} v{result.image_version}, "
        f"signature {result.image_signature.hex().upper()}",
        f"map:   {args.map}",
        f"  header:  v{result.map_version}, signature {sig}",
    ]
    if result.recomputed is not None:
        lines.append(f"  recomputed from the image's MVID {image.mvid()}: "
                     f"{result.recomputed.hex().upper()}")  # fmt: skip
    lines.extend(f"note: {note}" for note in result.notes)
    if result.ok:
        lines.append("OK: the map belongs to the image (signatures match)")
    else:
        lines.append("MISMATCH: the map was not generated for this image (signatures differ)")
    _say(lines)
    return 0 if result.ok else 1
