"""File input and atomic output for the perf-map family.

Inputs are read whole (maps are text of at most tens of MB); ``-`` means stdin. Outputs
go to a temporary file in the destination directory and are renamed over the target,
so a crash never leaves a half-written map where ``perf`` would read it.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import BinaryIO

from profkit.errors import FormatError, ProfkitError
from profkit.export import atomic as _atomic
from profkit.export.atomic import write_stdout

__all__ = ["atomic_output", "read_input", "write_atomic", "write_stdout"]


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


def write_atomic(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (:mod:`profkit.export.atomic`); an OS error
    becomes one ProfkitError naming the file."""
    try:
        _atomic.write_atomic(path, data)
    except OSError as exc:
        raise ProfkitError(f"{path}: cannot write: {exc.strerror or exc}") from None


@contextlib.contextmanager
def atomic_output(path: str) -> Iterator[BinaryIO]:
    """A binary file written in pieces, published by rename only when complete
    (:class:`profkit.export.atomic.AtomicOutput`); an OS error becomes a ProfkitError."""
    try:
        with _atomic.AtomicOutput(path) as fh:
            yield fh
    except OSError as exc:
        if isinstance(exc, BrokenPipeError):
            raise
        raise ProfkitError(f"{path}: cannot write: {exc.strerror or exc}") from None

