"""``profkit perfmap symbolize``: name the ``[unknown]`` frames of ``perf script`` output.

Why a module of its own: symbolizing gathers the most machinery of any action: maps
given with ``--map``, bases from perfinfo and MMAP events, and maps built from the R2R
images those name (cached), placed at their bases, then a stream through perf's text.
"""

from __future__ import annotations

import argparse
import sys

from profkit._atomic import write_stdout
from profkit._text import MAX_MESSAGE_CHARS, escape
from profkit.cli.perfmap_common import (
    add_r2rmap,
    base_files,
    base_resolver,
    load_any_map,
    refuse_overwrite,
)
from profkit.errors import FormatError, UsageError
from profkit.formats.perfmap._io import atomic_output, iter_lines, open_stream
from profkit.formats.perfmap.bases import map_stem
from profkit.formats.perfmap.mmapevents import image_base, image_finder, load_mmap_events
from profkit.formats.perfmap.perfinfo import load_perfinfo
from profkit.formats.perfmap.perfscript import ImageFinder, SymbolizeStats, symbolize_stream
from profkit.formats.perfmap.procmaps import image_stem
from profkit.formats.perfmap.r2rmap import R2RPerfMap
from profkit.formats.perfmap.symbolizer import Symbolizer
from profkit.formats.r2r.imagemaps import ImageMaps, ImageTable, default_cache_dir


def run_symbolize(args: argparse.Namespace) -> int:
    """The ``symbolize`` handler: ``perf script`` text in, the same with frames named out."""
    refuse_overwrite(args.output, [args.input, *args.maps, *base_files(args)])
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


def _symbolizer(
    args: argparse.Namespace, paths: list[str], images: ImageMaps | None = None
) -> Symbolizer:
    resolver = base_resolver(args, paths)
    sym = Symbolizer()
    loaded = [(p, load_any_map(p, args.lenient)) for p in paths]
    n_r2r = sum(isinstance(m, R2RPerfMap) for _, m in loaded)
    for path, m in loaded:
        if isinstance(m, R2RPerfMap):
            base, _ = resolver.base_for(path, only_map=n_r2r == 1)
            add_r2rmap(sym, m, base, path)
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
