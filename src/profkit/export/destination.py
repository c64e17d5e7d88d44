"""Where a profile goes: decided once, as a :class:`Destination`, for every way of saving one.

``profkit run`` (:mod:`profkit.runner.session`), environment activation
(:mod:`profkit.runner.activation`), ``profkit attach``, and the engines that save their
child processes' profiles themselves (the out-of-process sampler) all decide the path,
the format, the children's file names, the saving and the line that says where it went
here, from the one format table (:data:`profkit.export.registry.FORMATS`).

Naming (documented in ``docs/elt.md``):

* ``profkit run`` writes ``-o FILE`` or, by default, ``profkit-<program>-<pid>-<random>.json``
  in the current directory (``<program>`` is the script's stem, the module name, or ``c``;
  ``<random>`` is 8 hex digits, so that nobody can plant a file or link at the name in a
  shared directory before the run ends); with ``-o DIR/`` (or an existing directory), the
  default name in that directory. The default ending is the format's (``.html``...).
* The format is ``--format``, else what ``-o``'s ending names (``out.html``,
  ``out.speedscope.json``...: the table's ``endings``), else profkit's own.
* Child processes write ``<stem>.<pid><suffix>`` next to the parent's file:
  ``PROFKIT_OUTPUT`` may hold the placeholder ``{pid}``, which every process replaces
  with its own id; an ending of two suffixes (``.json.gz``, ``.pb.gz``) stays whole.
* An environment-activated profiler without ``PROFKIT_OUTPUT`` writes
  ``profkit-<program>-<pid>-<random>.json`` in the directory it started in.
"""

from __future__ import annotations

import os
import sys

from profkit.calltree.model import CallProfile
from profkit.errors import open_file_limit_note
from profkit.export.registry import COMPOUND_ENDINGS, ExportFormat, chosen

TYPE_CHECKING = False  # typing's, without importing typing at run time (profkit run's start-up)
if TYPE_CHECKING:
    from typing import TextIO

PID = "{pid}"


class Destination:
    """One profile's file and format, decided once (:meth:`decide`).

    ``path`` is the name as the user gave it (messages); ``file`` the one written (made
    absolute at the start of ``profkit run``, in case the program changes directory).
    """

    __slots__ = ("file", "format", "path")

    def __init__(self, path: str, fmt: ExportFormat, file: str | None = None) -> None:
        self.path = path
        self.format = fmt
        self.file = path if file is None else file

    @classmethod
    def decide(
        cls,
        output: str | None,
        fmt: str,
        label: str,
        base_dir: str = "",
        *,
        absolute: bool = True,
    ) -> Destination:
        """``-o output`` (None: the default name for ``label``) in format ``fmt`` (empty:
        what the ending names); relative names under ``base_dir``; ``absolute``: write the
        file by its absolute name, fixed now."""
        chosen_ = chosen(output, fmt)
        path = output_path(output, label, base_dir, chosen_.extension)
        return cls(path, chosen_, os.path.abspath(path) if absolute else path)

    @property
    def template(self) -> str:
        """The file a child process writes, ``{pid}`` still in it (``out.{pid}.json``)."""
        return child_template(self.file)

    def child(self, pid: int) -> Destination:
        """Where the child process ``pid``'s profile goes, in this format."""
        path = self.template.replace(PID, str(pid))
        return Destination(path, self.format)

    def save(self, profile: CallProfile) -> str | None:
        """Write ``profile`` (atomically, streaming); why it could not be, else None.

        profkit's own format goes through :mod:`profkit.calltree.stream_writer` (on a
        terminal, a save taking over a second says so on stderr while it runs); any other
        is written by the export library, as ``profkit export`` would write it.
        """
        try:
            if not self.format.module:
                from profkit.calltree import stream_writer  # only at the end: json, gzip

                err = stderr()
                stream_writer.save(profile, self.file, announce=err if _isatty(err) else None)
            else:
                from profkit.export import registry

                registry.export(profile, self.format.name, self.file)
        except OSError as exc:
            return str(exc.strerror or exc) + open_file_limit_note(exc)
        return None

    def view_hint(self) -> str:
        """How to look at the file (the format's ``view`` column)."""
        return self.format.view.format(path=self.path)

    def announcement(self, mode: str = "") -> str:
        """The lines saying where the profile went and how to look at it; for a memory
        profile (``mode``) in a format whose only unit is time, what its bytes became."""
        note = self.format.bytes_note if mode == "memory" else ""
        return f"profkit: profile saved to {self.path}\nprofkit: view it: {self.view_hint()}\n" + (
            f"profkit: note: {note}\n" if note else ""
        )

    def __repr__(self) -> str:
        return f"Destination({self.path!r}, {self.format.name!r}, file={self.file!r})"


def program_label(argv0: str) -> str:
    """A file-name-safe label for the program: script stem, module name, or ``c``."""
    if argv0 in ("-c", ""):
        return "c"
    directory, name = _split(argv0)
    stem = name[: len(name) - len(_suffix(name))]
    if stem == "__main__":
        stem = _split(directory)[1] or stem
    import re  # here, not at every run's start

    return re.sub(r"[^A-Za-z0-9_.-]+", "_", stem) or "python"


def default_output(label: str, extension: str = ".json") -> str:
    """``profkit-<label>-{pid}-<random>.json`` (``{pid}`` replaced by :func:`resolve_output`).

    The random part makes the name unpredictable: a pid alone can be guessed, and a file
    or symlink planted at the name in a shared directory would receive the profile.
    """
    return f"profkit-{label}-{PID}-{os.urandom(4).hex()}{extension}"


def child_template(path: str, default_suffix: str = ".json") -> str:
    """``out.json`` -> ``out.{pid}.json``: the file each child process writes.

    Also for ``--stream FILE`` (``events.txt`` -> ``events.{pid}.txt``): a child
    writing the parent's file would truncate it and overwrite its lines.
    """
    directory, name = _split(path)
    # "out.pb.gz" -> "out.{pid}.pb.gz" (a name that is only the ending, ".json.gz", has none)
    compound = (c for c in COMPOUND_ENDINGS if name.endswith(c) and name.lstrip(".") != c[1:])
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
    """``template`` with ``{pid}`` replaced (by this process's id unless ``pid``)."""
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


def stderr() -> TextIO:
    """Where profkit's end-of-run lines go: the program may have replaced or closed
    ``sys.stderr``; then the original."""
    stream = sys.stderr
    if stream is None or getattr(stream, "closed", False):
        stream = sys.__stderr__
    return stream  # type: ignore[return-value]


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
