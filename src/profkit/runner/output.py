"""Where a profile goes at the end: file names, saving, and the tree on stderr.

Naming (documented in ``docs/elt.md``):

* ``profkit run`` writes ``-o FILE`` or, by default, ``profkit-<program>-<pid>-<random>.json``
  in the current directory (``<program>`` is the script's stem, the module name, or ``c``;
  ``<random>`` is 8 hex digits, so that nobody can plant a file or link at the name in a
  shared directory before the run ends); with ``-o DIR/`` (or an existing directory), the
  default name in that directory.
* Child processes profiled through environment activation write
  ``<stem>.<pid><suffix>`` next to the parent's file: ``PROFKIT_OUTPUT`` may hold the
  placeholder ``{pid}``, which every process replaces with its own id.
* An environment-activated profiler without ``PROFKIT_OUTPUT`` writes
  ``profkit-<program>-<pid>-<random>.json`` in its working directory.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from collections.abc import Iterator
from typing import TextIO

from profkit._record import replace
from profkit.calltree.model import CallProfile

PID = "{pid}"


def program_label(argv0: str) -> str:
    """A file-name-safe label for the program: script stem, module name, or ``c``."""
    if argv0 in ("-c", ""):
        return "c"
    directory, name = _split(argv0)
    stem = name[: len(name) - len(_suffix(name))]
    if stem == "__main__":
        stem = _split(directory)[1] or stem
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", stem) or "python"


def default_output(label: str, extension: str = ".json") -> str:
    """``profkit-<label>-{pid}-<random>.json`` (``{pid}`` replaced by :func:`resolve_output`).

    The random part makes the name unpredictable: a pid alone can be guessed, and a file
    or symlink planted at the name in a shared directory would receive the profile.
    """
    return f"profkit-{label}-{PID}-{os.urandom(4).hex()}{extension}"


#: profkit's own saved-profile format (``profkit report``/``export`` read it): ``--format``'s
#: default; every other format is one of :mod:`profkit.export`'s.
NATIVE_FORMAT = "profile"

#: ``-o`` endings that name an export format (longest first), when ``--format`` is not given.
_ENDINGS: tuple[tuple[str, str], ...] = (
    (".speedscope.json", "speedscope"),
    (".trace.json", "chrome"),
    (".collapsed.txt", "collapsed"),
    (".collapsed", "collapsed"),
    (".pb.gz", "pprof"),
    (".pstats", "pstats"),
    (".html", "html"),
)

#: Endings made of two suffixes, kept whole when a child's ``{pid}`` is put before them.
_COMPOUND = (".json.gz", ".speedscope.json", ".trace.json", ".collapsed.txt", ".pb.gz")


def format_for(output: str | None, explicit: str) -> str:
    """The format to write: ``--format`` if given, else what ``-o``'s ending names, else
    profkit's own (``.json``, ``.json.gz``, anything else)."""
    if explicit:
        return explicit
    lower = (output or "").lower()
    return next((name for ending, name in _ENDINGS if lower.endswith(ending)), NATIVE_FORMAT)


def extension_of(fmt: str) -> str:
    """The default file ending of a format (``.json`` for profkit's own)."""
    if fmt == NATIVE_FORMAT:
        return ".json"
    from profkit.export import registry

    return registry.get(fmt).extension


#: How to look at each format, said once after saving (``{path}`` is the file).
_HOW_TO_VIEW = {
    NATIVE_FORMAT: "profkit report {path}  (or profkit export -F html {path})",
    "html": "open {path} in a browser",
    "speedscope": "open {path} at https://www.speedscope.app",
    "chrome": "open {path} at https://ui.perfetto.dev (or chrome://tracing)",
    "pstats": "python -m pstats {path}  (or snakeviz {path})",
    "collapsed": "flamegraph.pl {path} > flame.svg  (or inferno-flamegraph)",
    "pprof": "go tool pprof -http=: {path}",
}


def how_to_view(fmt: str, path: str) -> str:
    """One line saying how to look at ``path`` written in ``fmt``."""
    return _HOW_TO_VIEW.get(fmt, "profkit report {path}").format(path=path)


def child_template(path: str, default_suffix: str = ".json") -> str:
    """``out.json`` -> ``out.{pid}.json``: the file each child process writes.

    Also for ``--stream FILE`` (``events.txt`` -> ``events.{pid}.txt``): a child
    writing the parent's file would truncate it and overwrite its lines.
    """
    directory, name = _split(path)
    # "out.pb.gz" -> "out.{pid}.pb.gz" (a name that is only the ending, ".json.gz", has none)
    compound = (c for c in _COMPOUND if name.endswith(c) and name.lstrip(".") != c[1:])
    suffixes = next(compound, "") or _suffix(name)
    stem = name[: len(name) - len(suffixes)]
    return os.path.join(directory, f"{stem}.{PID}{suffixes or default_suffix}")


# pathlib's naming rules (3.12), written out: importing pathlib costs ~5 ms of start-up.
def _split(path: str) -> tuple[str, str]:
    """``(parent, name)`` as ``PurePath`` sees them: ``a/b/`` is ``b``, ``.`` has no name."""
    path = path.rstrip(os.sep) or path
    directory, name = os.path.split(path)
    return directory, "" if name == "." else name


def _suffix(name: str) -> str:
    """``PurePath.suffix``: the last ``.ext``, not a leading dot, not a trailing one."""
    i = name.rfind(".")
    return name[i:] if 0 < i < len(name) - 1 else ""


def resolve_output(template: str, pid: int | None = None) -> str:
    return template.replace(PID, str(os.getpid() if pid is None else pid))


def output_path(
    output: str | None, label: str, base_dir: str = "", extension: str = ".json"
) -> str:
    """The profile file to write, ``{pid}`` resolved, relative paths under ``base_dir``.

    No ``output``: the default name. An ``output`` naming a directory — an existing one,
    or any path ending in ``/`` — gets the default name inside it (``-o runs/``), rather
    than failing with "Is a directory" or becoming a file named ``runs``.
    """
    default = resolve_output(default_output(label, extension))
    if not output:
        return os.path.join(base_dir, default)
    path = os.path.join(base_dir, resolve_output(output))
    if path.endswith(("/", os.sep)) or os.path.isdir(path):
        return os.path.join(path, default)
    return path


#: Most threads whose trees are printed at the end (the hottest); ``profkit report`` shows all.
MAX_THREADS_SHOWN = 8


def render(profile: CallProfile, stream: TextIO) -> str:
    """The call tree as ``profkit report`` prints it, fitted to the terminal of ``stream``.

    A program with hundreds of threads would print hundreds of trees: only the
    :data:`MAX_THREADS_SHOWN` busiest are printed (in their order), then one line for
    the rest.
    """
    from profkit.report.text import render_tree

    more = ""
    if len(profile.threads) > MAX_THREADS_SHOWN:
        by_time = sorted(profile.threads, key=lambda t: t.root.inclusive_ns, reverse=True)
        kept = {id(t) for t in by_time[:MAX_THREADS_SHOWN]}
        rest = len(profile.threads) - MAX_THREADS_SHOWN
        more = f"\n… {rest} more threads (profkit report FILE shows every thread)\n"
        profile = replace(profile, threads=[t for t in profile.threads if id(t) in kept])

    tty = _isatty(stream)
    width: int | None = None  # a file or a pipe: full names, nothing cut (issue #11)
    if tty:
        width = 80
        with contextlib.suppress(OSError, ValueError):
            width = max(os.get_terminal_size(stream.fileno()).columns, 60)
    color = tty and not os.environ.get("NO_COLOR")
    # no depth cap: chains and import machinery are folded instead, so the hot path fits
    tree = render_tree(
        profile, width=width, color=color, min_share=0.02, top=8, fold=True, hot_spots=3
    )
    from profkit.report.flat import not_seen_note

    note = not_seen_note(profile)
    return tree + more + (f"profkit: {note}\n" if note else "")


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def save(profile: CallProfile, path: str, fmt: str = NATIVE_FORMAT) -> str | None:
    """Write ``profile`` to ``path`` in ``fmt`` (atomically, streaming); why it could not
    be, else None.

    profkit's own format goes through :mod:`profkit.calltree.stream_writer` (on a
    terminal, a save taking over a second says so on stderr while it runs); any other is
    written directly by the export library, as ``profkit export`` would write it.
    """
    try:
        if fmt == NATIVE_FORMAT:
            from profkit.calltree import stream_writer  # only at the end: json, gzip

            err = stderr()
            stream_writer.save(profile, path, announce=err if _isatty(err) else None)
        else:
            from profkit.export import registry

            registry.export(profile, fmt, path)
    except OSError as exc:
        return str(exc.strerror or exc) + _fd_limit_hint(exc)
    return None


def _fd_limit_hint(exc: OSError) -> str:
    """Why no file could be opened, when the program lowered its open-file limit (issue
    #22: the message named the profkit module an import could not open instead)."""
    import errno

    if exc.errno != errno.EMFILE:
        return ""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, OSError, ValueError):
        return ""
    return f": the program's open-file limit (RLIMIT_NOFILE) is {soft}"


#: The depth profkit's own end-of-run work (building, saving, printing a tree) may need.
_ORDINARY_RECURSION_LIMIT = 1000


@contextlib.contextmanager
def ordinary_recursion_limit() -> Iterator[None]:
    """Run profkit's own end-of-run work at an ordinary recursion limit.

    A program may set ``sys.setrecursionlimit(30)`` and leave it so: the profile must
    still be saved (it used to be lost to a ``RecursionError``). The program's limit is
    put back afterwards (its ``atexit`` handlers may count on it).
    """
    limit = sys.getrecursionlimit()
    if limit < _ORDINARY_RECURSION_LIMIT:
        sys.setrecursionlimit(_ORDINARY_RECURSION_LIMIT)
    try:
        yield
    finally:
        if limit < _ORDINARY_RECURSION_LIMIT:
            with contextlib.suppress(RecursionError, ValueError):
                sys.setrecursionlimit(limit)


def stderr() -> TextIO:
    """Where profkit's end-of-run lines go: the program may have replaced or closed
    ``sys.stderr``; then the original."""
    stream = sys.stderr
    if stream is None or getattr(stream, "closed", False):
        stream = sys.__stderr__
    return stream  # type: ignore[return-value]
