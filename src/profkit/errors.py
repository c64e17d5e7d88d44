"""One root for every error profkit raises on purpose.

The command line turns any :class:`ProfkitError` into a single line on stderr and exit
status 2; anything else reaching the top is a profkit bug and is reported as such.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing's, without importing typing at run time (profkit run's start-up)
if TYPE_CHECKING:
    from typing import Literal

    FormatErrorKind = Literal[
        "bad_magic",
        "unsupported_version",
        "truncated",
        "malformed",
        "too_large",
        "incompatible",
        "unreadable",  # missing, a directory, a device: said as is ("x.json: no such file")
    ]
else:
    FormatErrorKind = str  # the alias is for type checkers


class ProfkitError(Exception):
    """Base class of profkit's own errors; ``str(err)`` is the one-line user message."""

    #: the command's exit status for this error (the project's rule: 2)
    exit_status = 2


class UsageError(ProfkitError):
    """A bad command-line argument or option value."""


class NoSuchModuleError(UsageError):
    """``profkit run -m NAME`` for a module that cannot be found (or a directory or zip
    app without ``__main__``): exit status 1 and python's own words, as ``python -m NAME``
    ends ("same exit status as python")."""

    exit_status = 1


class SettingsError(ProfkitError):
    """A ``PROFKIT_*`` environment variable or flag holds a value profkit cannot use."""


class FormatError(ProfkitError):
    """A file that does not follow its format.

    Carries the file, the byte offset (or line number for line-oriented formats) and
    a kind from a small fixed set, so callers can branch on ``kind`` and users see
    *where* the file went wrong, not just that it did.
    """

    def __init__(
        self,
        kind: FormatErrorKind,
        detail: str,
        *,
        path: str | None = None,
        offset: int | None = None,
        line: int | None = None,
    ) -> None:
        self.kind = kind
        self.detail = detail
        self.path = path
        self.offset = offset
        self.line = line
        super().__init__(self._message())

    def _message(self) -> str:
        where = []
        if self.path is not None:
            where.append(self.path)
        if self.offset is not None:
            where.append(f"offset 0x{self.offset:x}")
        if self.line is not None:
            where.append(f"line {self.line}")
        prefix = ": ".join(where)
        if self.kind == "unreadable":  # not the file's content: no kind word in front
            body = self.detail
        else:
            body = f"{self.kind.replace('_', ' ')}: {self.detail}"
        return f"{prefix}: {body}" if prefix else body

    def with_path(self, path: str) -> FormatError:
        """Return a copy naming ``path``; readers of in-memory bytes learn the name late."""
        return type(self)(self.kind, self.detail, path=path, offset=self.offset, line=self.line)

    def __str__(self) -> str:
        return self._message()


class ProfileFormatError(FormatError):
    """An LLVM instrumentation profile (raw, indexed or text) that cannot be read."""


class PerfMapFormatError(FormatError):
    """A perf map, R2R perf map or perfinfo file that cannot be read."""


class ProfileDataError(FormatError):
    """A saved profkit profile (``profkit run`` output) that cannot be read."""


def open_file_limit_note(exc: OSError) -> str:
    """``": the program's open-file limit (RLIMIT_NOFILE) is N"`` when ``exc`` is EMFILE,
    else ``""``: said after a failed save in place of the file that could not be opened,
    which is profkit's own module more often than not (an import at the end of a run whose
    program lowered the limit; issue #22 item 15).

    Here because every saver has this module already: under the limit, importing one
    more is the very thing that fails (``errno`` is built in; ``resource`` is loaded when
    the program lowered its own limit with it).
    """
    import errno

    if exc.errno != errno.EMFILE:
        return ""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, OSError, ValueError):
        return ": the program's open-file limit (RLIMIT_NOFILE) is used up"
    return f": the program's open-file limit (RLIMIT_NOFILE) is {soft}"
