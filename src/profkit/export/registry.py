"""The one table of export formats: ``--format`` choices, help text, default file names
and dispatch are all derived from :data:`FORMATS` (no parallel lists to forget).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import BinaryIO

from profkit._atomic import AtomicOutput
from profkit.calltree.model import CallProfile
from profkit.errors import UsageError


@dataclass(frozen=True, slots=True)
class ExportFormat:
    """One exporter: its module under ``profkit.export`` provides ``write(profile) -> bytes``."""

    name: str
    extension: str  #: appended to the input's stem for the default output name
    binary: bool  #: refused on a terminal
    description: str
    module: str

    @property
    def writer(self) -> Callable[[CallProfile], bytes]:
        """The format's ``write`` function (its module is imported on first use)."""
        write: Callable[[CallProfile], bytes] = importlib.import_module(
            f"profkit.export.{self.module}"
        ).write
        return write

    @property
    def stream_writer(self) -> Callable[[CallProfile, BinaryIO], None]:
        """``write_to(profile, out)``: the module's streaming writer, or its ``write``
        wrapped (formats whose output is small next to the profile: html, pstats)."""
        module = importlib.import_module(f"profkit.export.{self.module}")
        write_to: Callable[[CallProfile, BinaryIO], None] | None = getattr(module, "write_to", None)
        if write_to is not None:
            return write_to
        write: Callable[[CallProfile], bytes] = module.write

        def whole(profile: CallProfile, out: BinaryIO) -> None:
            out.write(write(profile))

        return whole


FORMATS: tuple[ExportFormat, ...] = (
    ExportFormat(
        "html",
        ".html",
        False,
        "self-contained HTML flame graph (open in any browser, works offline)",
        "html",
    ),
    ExportFormat(
        "speedscope",
        ".speedscope.json",
        False,
        "speedscope JSON (speedscope.app, offline speedscope)",
        "speedscope",
    ),
    ExportFormat(
        "chrome",
        ".trace.json",
        False,
        "Chrome trace event JSON (Perfetto UI, chrome://tracing)",
        "chrome",
    ),
    ExportFormat(
        "pstats", ".pstats", True, "Python pstats (pstats.Stats, snakeviz, gprof2dot)", "pstats"
    ),
    ExportFormat(
        "collapsed",
        ".collapsed.txt",
        False,
        "collapsed stacks 'a;b;c ns' (flamegraph.pl, inferno)",
        "collapsed",
    ),
    ExportFormat(
        "pprof", ".pb.gz", True, "gzipped pprof protobuf (go tool pprof, Pyroscope)", "pprof"
    ),
)

_BY_NAME = {f.name: f for f in FORMATS}


def names() -> list[str]:
    """Format names, in table order."""
    return [f.name for f in FORMATS]


def get(name: str) -> ExportFormat:
    """The format called ``name``; a :class:`UsageError` listing the choices otherwise."""
    found = _BY_NAME.get(name)
    if found is None:
        raise UsageError(f"unknown export format {name!r} (choose from {', '.join(names())})")
    return found


def help_text() -> str:
    """One line per format, for ``profkit export --help``."""
    width = max(len(f.name) for f in FORMATS)
    return "\n".join(f"  {f.name:<{width}}  {f.description} [{f.extension}]" for f in FORMATS)


def default_output(input_path: str, fmt: ExportFormat) -> str:
    """``run.pkprof.json.gz`` → ``run.html``: the input's name minus its known suffixes."""
    base = os.path.basename(input_path)
    for suffix in (".gz", ".json", ".pkprof", ".profkit"):
        if base.endswith(suffix) and len(base) > len(suffix):
            base = base[: -len(suffix)]
    return os.path.join(os.path.dirname(input_path), base + fmt.extension)


def export(profile: CallProfile, name: str, path: str | os.PathLike[str]) -> None:
    """Write ``profile`` in format ``name`` to ``path`` atomically, streamed."""
    with AtomicOutput(path) as out:
        get(name).stream_writer(profile, out)
