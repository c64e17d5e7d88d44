"""What the ``profkit perfmap`` actions share: loading maps, load bases, safe outputs.

Why a module of its own: ``lookup``, ``convert`` and ``symbolize`` all load maps the same
way (r2rmap by header or name, else perf map; ``--lenient`` warnings), take image bases
from the same options, and refuse an output that is one of their inputs.
"""

from __future__ import annotations

import argparse
import sys

from profkit._atomic import refuse_input_as_output, write_stdout
from profkit._text import MAX_MESSAGE_CHARS, escape
from profkit.errors import PerfMapFormatError, UsageError
from profkit.formats.perfmap._io import read_input
from profkit.formats.perfmap.bases import BaseResolver, map_stem
from profkit.formats.perfmap.mmapevents import image_finder, load_mmap_events
from profkit.formats.perfmap.perfinfo import load_perfinfo
from profkit.formats.perfmap.perfpid import PerfMap
from profkit.formats.perfmap.procmaps import load_proc_maps
from profkit.formats.perfmap.r2rmap import R2RPerfMap
from profkit.formats.perfmap.sniff import read_any_map
from profkit.formats.perfmap.symbolizer import Symbolizer


def load_any_map(path: str, lenient: bool) -> R2RPerfMap | PerfMap:
    """An r2rmap (by header or file name) or else a perf map (:func:`read_any_map`)."""
    m = read_any_map(read_input(path, PerfMapFormatError), path, strict=not lenient)
    warn_skipped(path, m.skipped)
    return m


def warn_skipped(path: str, skipped: list[tuple[int, str]]) -> None:
    """One warning line for the lines ``--lenient`` skipped, naming the first."""
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


def base_resolver(args: argparse.Namespace, map_paths: list[str]) -> BaseResolver:
    """The load bases named by ``--base``, ``--perfinfo``, ``--proc-maps``, ``--mmap-events``."""
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


def add_r2rmap(sym: Symbolizer, m: R2RPerfMap, base: int, path: str) -> None:
    """Place an r2rmap at ``base``; a base that overflows the address space is a usage error."""
    try:
        sym.add_r2rmap(m, base, path)
    except ValueError as exc:  # a base that pushes the map past 2**64
        raise UsageError(f"{path}: {exc}") from None


def refuse_overwrite(output: str, inputs: list[str]) -> None:
    """Inputs are never modified: an output that is one of them is a usage error."""
    clash = refuse_input_as_output(output, inputs)
    if clash is not None:
        raise UsageError(
            f"{output}: the output is one of the inputs ({clash}); inputs are never modified"
        )


def base_files(args: argparse.Namespace) -> list[str]:
    """Every file the base options read (outputs must not replace them)."""
    return [*args.perfinfo, *args.proc_maps, *args.mmap_events]


def say(lines: list[str]) -> None:
    """Print lines to stdout through :func:`write_stdout` (errors reported, not lost),
    control characters from map names escaped (:func:`profkit._text.escape`)."""
    text = "\n".join(escape(line) for line in lines) + "\n"
    write_stdout(text.encode("utf-8", "backslashreplace"))
