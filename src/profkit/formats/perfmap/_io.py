"""File input and atomic output for the perf-map family.

Inputs are read whole (maps are text of at most tens of MB); ``-`` means stdin. Outputs
go to a temporary file in the destination directory and are renamed over the target,
so a crash never leaves a half-written map where ``perf`` would read it.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from typing import BinaryIO

from profkit.errors import FormatError, ProfkitError


def read_input(path: str, error: type[FormatError]) -> bytes:
    """Read ``path`` (or stdin for ``-``); an OS error becomes one clear ProfkitError."""
    if path == "-":
        return sys.stdin.buffer.read()
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except IsADirectoryError:
        raise error("malformed", "is a directory, not a file", path=path) from None
    except OSError as exc:
        raise ProfkitError(f"{path}: cannot read: {exc.strerror or exc}") from None


def write_atomic(path: str, data: bytes, *, mode: int | None = None) -> None:
    """Write ``data`` to ``path`` via a temp file in the same directory + ``os.replace``.

    ``mode`` sets the permission bits; by default an existing target's bits are kept and a
    new file gets ``0o644`` minus the umask, like a plain ``open``.
    """
    directory = os.path.dirname(os.path.abspath(path))
    if mode is None:
        try:
            mode = os.stat(path).st_mode & 0o7777
        except OSError:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
    try:
        fd, tmp = tempfile.mkstemp(prefix=".profkit-", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise ProfkitError(f"{path}: cannot write: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise ProfkitError(f"{path}: cannot write: {exc.strerror or exc}") from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


class AtomicOutput:
    """A binary file written in pieces, published by rename only when complete.

    ``with AtomicOutput(path) as fh: fh.write(...)``: on success the temp file replaces
    ``path``; on any exception it is removed and ``path`` is untouched.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._tmp: str | None = None
        self._fh: BinaryIO | None = None

    def __enter__(self) -> BinaryIO:
        directory = os.path.dirname(os.path.abspath(self.path))
        try:
            fd, self._tmp = tempfile.mkstemp(prefix=".profkit-", suffix=".tmp", dir=directory)
        except OSError as exc:
            raise ProfkitError(f"{self.path}: cannot write: {exc.strerror or exc}") from None
        self._fh = os.fdopen(fd, "wb")
        return self._fh

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        assert self._fh is not None and self._tmp is not None
        try:
            if exc_type is None:
                self._fh.flush()
                os.fsync(self._fh.fileno())
            self._fh.close()
            if exc_type is None:
                umask = os.umask(0)
                os.umask(umask)
                os.chmod(self._tmp, 0o666 & ~umask)
                os.replace(self._tmp, self.path)
                self._tmp = None
        except OSError as err:
            raise ProfkitError(f"{self.path}: cannot write: {err.strerror or err}") from None
        finally:
            if self._tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(self._tmp)
