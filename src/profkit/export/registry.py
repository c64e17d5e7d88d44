"""The one table of output formats: ``--format`` choices, help text, ``-o`` endings, file
names, viewing hints and dispatch are all derived from :data:`FORMATS` (no parallel lists
to forget). A new format is one row (and its module).

profkit's own saved-profile format is a row too (:data:`NATIVE`: what ``profkit report``
and ``profkit export`` read, written by :mod:`profkit.calltree.stream_writer`); the other
rows, :data:`EXPORTS`, are the ``profkit export`` formats, each a module under
``profkit.export`` with ``write(profile) -> bytes``.

Importing this module is cheap (no exporter is imported until used): ``profkit run``
reads the table at start-up to decide its output (:mod:`profkit.export.destination`).
"""

from __future__ import annotations

import os
from collections.abc import Callable

from profkit._record import record
from profkit.calltree.model import CallProfile
from profkit.errors import UsageError

TYPE_CHECKING = False  # typing's, without importing typing at run time (profkit run's start-up)
if TYPE_CHECKING:
    from typing import BinaryIO


@record(frozen=True)
class ExportFormat:
    """One output format (a row of :data:`FORMATS`)."""

    name: str
    #: ``-o`` endings that name this format when ``--format`` is not given; the first is
    #: its default file ending. Endings of two suffixes (``.pb.gz``) are kept whole when a
    #: child's ``{pid}`` goes before them.
    endings: tuple[str, ...]
    binary: bool  #: refused on a terminal
    description: str
    module: str  #: under ``profkit.export`` ('' for profkit's own: written by calltree)
    view: str  #: how to look at a file of it, said after saving (``{path}`` is the file)
    #: What a memory profile's bytes become in a format that has no unit but time, said
    #: whenever one is written ('' where the format names bytes as bytes, or has no unit).
    bytes_note: str = ""

    @property
    def extension(self) -> str:
        """The default file ending (appended to the input's stem by ``profkit export``)."""
        return self.endings[0]

    @property
    def writer(self) -> Callable[[CallProfile], bytes]:
        """The format's ``write`` function (its module is imported on first use)."""
        import importlib

        write: Callable[[CallProfile], bytes] = importlib.import_module(
            f"profkit.export.{self.module}"
        ).write
        return write

    @property
    def stream_writer(self) -> Callable[[CallProfile, BinaryIO], None]:
        """``write_to(profile, out)``: the module's streaming writer, or its ``write``
        wrapped (formats whose output is small next to the profile: html, pstats)."""
        import importlib

        module = importlib.import_module(f"profkit.export.{self.module}")
        write_to: Callable[[CallProfile, BinaryIO], None] | None = getattr(module, "write_to", None)
        if write_to is not None:
            return write_to
        write: Callable[[CallProfile], bytes] = module.write

        def whole(profile: CallProfile, out: BinaryIO) -> None:
            out.write(write(profile))

        return whole


#: profkit's own saved profile: ``--format``'s default, and what any other ``-o`` ending
#: (``.json``, ``.json.gz``, ``.prof``...) writes.
NATIVE = ExportFormat(
    "profile",
    (".json", ".json.gz"),
    False,
    "profkit's own saved profile (profkit report, profkit export read it)",
    "",
    "profkit report {path}  (or profkit export -F html {path})",
)

FORMATS: tuple[ExportFormat, ...] = (
    NATIVE,
    ExportFormat(
        "html",
        (".html",),
        False,
        "self-contained HTML view: call tree with library frames folded, flame graph, timeline "
        "(any browser, offline)",
        "html",
        "open {path} in a browser",
    ),
    ExportFormat(
        "speedscope",
        (".speedscope.json",),
        False,
        "speedscope JSON (speedscope.app, offline speedscope)",
        "speedscope",
        "open {path} at https://www.speedscope.app",
    ),
    ExportFormat(
        "gecko",
        (".gecko.json",),
        False,
        "Firefox Profiler JSON, processed format v57 (profiler.firefox.com)",
        "gecko",
        "open {path} at https://profiler.firefox.com (Load a profile from file)",
    ),
    ExportFormat(
        "chrome",
        (".trace.json",),
        False,
        "Chrome trace event JSON (Perfetto UI, chrome://tracing)",
        "chrome",
        "open {path} at https://ui.perfetto.dev (or chrome://tracing)",
        "Chrome traces have no unit but time: this memory profile's bytes are its "
        "nanoseconds (1 ns = 1 byte)",
    ),
    ExportFormat(
        "pstats",
        (".pstats",),
        True,
        "Python pstats (pstats.Stats, snakeviz, gprof2dot)",
        "pstats",
        "python -m pstats {path}  (or snakeviz {path})",
        "pstats has no unit but seconds: this memory profile's bytes are its seconds "
        "(1 s = 1 byte) and its calls are samples",
    ),
    ExportFormat(
        "collapsed",
        (".collapsed.txt", ".collapsed"),
        False,
        "collapsed stacks 'a;b;c ns' (flamegraph.pl, inferno)",
        "collapsed",
        "flamegraph.pl {path} > flame.svg  (or inferno-flamegraph)",
    ),
    ExportFormat(
        "pprof",
        (".pb.gz",),
        True,
        "gzipped pprof protobuf (go tool pprof, Pyroscope)",
        "pprof",
        "go tool pprof -http=: {path}",
    ),
)

#: The ``profkit export`` formats: every row but profkit's own.
EXPORTS: tuple[ExportFormat, ...] = tuple(f for f in FORMATS if f.module)

_BY_NAME = {f.name: f for f in FORMATS}

#: Every ``-o`` ending that names a format, longest first (``.speedscope.json`` before
#: ``.json``), with its format.
_ENDINGS: tuple[tuple[str, ExportFormat], ...] = tuple(
    sorted(((e, f) for f in FORMATS for e in f.endings), key=lambda pair: -len(pair[0]))
)

#: Endings made of two suffixes, kept whole when a child's ``{pid}`` is put before them.
COMPOUND_ENDINGS: tuple[str, ...] = tuple(e for f in FORMATS for e in f.endings if e.count(".") > 1)


def bytes_note(fmt: ExportFormat, profile: CallProfile) -> str | None:
    """The row's :attr:`~ExportFormat.bytes_note` when ``profile`` is a memory profile."""
    return fmt.bytes_note if profile.mode == "memory" and fmt.bytes_note else None


def names() -> list[str]:
    """Export format names (``profkit export -F``), in table order."""
    return [f.name for f in EXPORTS]


def all_names() -> list[str]:
    """Every format's name (``--format``), profkit's own first."""
    return [f.name for f in FORMATS]


def get(name: str) -> ExportFormat:
    """The export format called ``name``; a :class:`UsageError` listing the choices otherwise."""
    found = _BY_NAME.get(name)
    if found is None or found is NATIVE:
        raise UsageError(f"unknown export format {name!r} (choose from {', '.join(names())})")
    return found


def row(name: str) -> ExportFormat:
    """Any format's row, profkit's own included (``name`` checked by the settings parser)."""
    return _BY_NAME[name]


def named_by(output: str | None) -> ExportFormat:
    """The format ``-o output``'s ending names; profkit's own for any other name."""
    lower = (output or "").lower()
    return next((f for ending, f in _ENDINGS if lower.endswith(ending)), NATIVE)


def chosen(output: str | None, explicit: str) -> ExportFormat:
    """The format to write: ``explicit`` (``--format``) if given, else what ``-o output``'s
    ending names, else profkit's own."""
    return row(explicit) if explicit else named_by(output)


def help_text() -> str:
    """One line per export format, for ``profkit export --help``."""
    width = max(len(f.name) for f in EXPORTS)
    return "\n".join(f"  {f.name:<{width}}  {f.description} [{f.extension}]" for f in EXPORTS)


def format_help() -> str:
    """``--format``'s help (``profkit run``, ``profkit clr run``, ``PROFKIT_FORMAT``)."""
    shortest = (min(f.endings, key=len) for f in EXPORTS)
    return (
        f"what to write: {NATIVE.name} (profkit's own, the default) or "
        f"{', '.join(names())}; by default -o's ending decides "
        f"({', '.join('out' + e for e in shortest)})"
    )


def default_output(input_path: str, fmt: ExportFormat) -> str:
    """``run.pkprof.json.gz`` → ``run.html``: the input's name minus its known suffixes."""
    base = os.path.basename(input_path)
    for suffix in (".gz", ".json", ".pkprof", ".profkit"):
        if base.endswith(suffix) and len(base) > len(suffix):
            base = base[: -len(suffix)]
    return os.path.join(os.path.dirname(input_path), base + fmt.extension)


def export(profile: CallProfile, name: str, path: str | os.PathLike[str]) -> None:
    """Write ``profile`` in export format ``name`` to ``path`` atomically, streamed."""
    from profkit._atomic import AtomicOutput

    with AtomicOutput(path) as out:
        get(name).stream_writer(profile, out)
