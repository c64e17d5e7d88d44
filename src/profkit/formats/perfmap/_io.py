"""File input and atomic output for the perf-map family.

Inputs are read whole (maps are text of at most tens of MB; at most
:data:`MAX_INPUT_BYTES`) or line by line with a cap on the line length; ``-`` means stdin. Outputs
go to a temporary file in the destination directory and are renamed over the target,
so a crash never leaves a half-written map where ``perf`` would read it.
"""

from __future__ import annotations

import contextlib
import functools
import os
import stat
import sys
from collections.abc import Iterator
from typing import BinaryIO

from profkit import _atomic
from profkit._atomic import write_stdout
from profkit.errors import FormatError, ProfkitError

__all__ = ["atomic_output", "iter_lines", "read_input", "write_atomic", "write_stdout"]


#: Largest input read whole (a 10-million-entry map is ~1 GB): ``show /dev/zero`` or a
#: wrong file must end in one error, not in the kernel's OOM killer (it took 24 GB).
MAX_INPUT_BYTES = 1 << 30
#: Longest line handed on by :func:`iter_lines`; a longer one comes in pieces.
MAX_LINE_BYTES = 1 << 20


def read_input(path: str, error: type[FormatError]) -> bytes:
    """Read ``path`` (or stdin for ``-``), at most :data:`MAX_INPUT_BYTES`; an OS error
    or an oversized input becomes one clear ProfkitError."""
    try:
        if path == "-":
            data = sys.stdin.buffer.read(MAX_INPUT_BYTES + 1)
        else:
            with open(path, "rb") as fh:
                # a regular file says its size: refuse it before reading a byte
                st = os.fstat(fh.fileno())
                if stat.S_ISREG(st.st_mode) and st.st_size > MAX_INPUT_BYTES:
                    raise error("too_large", f"larger than {MAX_INPUT_BYTES} bytes", path=path)
                data = fh.read(MAX_INPUT_BYTES + 1)
    except IsADirectoryError:
        raise error("malformed", "is a directory, not a file", path=path) from None
    except OSError as exc:
        raise ProfkitError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if len(data) > MAX_INPUT_BYTES:
        raise error("too_large", f"larger than {MAX_INPUT_BYTES} bytes", path=path)
    return data


def iter_lines(fh: BinaryIO) -> Iterator[bytes]:
    """The lines of ``fh`` (each with its newline) with bounded memory: a line longer than
    :data:`MAX_LINE_BYTES` (``/dev/zero`` has one endless line) comes in pieces."""
    return iter(functools.partial(fh.readline, MAX_LINE_BYTES), b"")


def write_atomic(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (:mod:`profkit._atomic`); an OS error
    becomes one ProfkitError naming the file."""
    with _atomic.write_errors(f"{path}: cannot write: "):
        _atomic.write_atomic(path, data)


@contextlib.contextmanager
def atomic_output(path: str) -> Iterator[BinaryIO]:
    """A binary file written in pieces, published by rename only when complete
    (:class:`profkit._atomic.AtomicOutput`); an OS error becomes a ProfkitError."""
    with _atomic.write_errors(f"{path}: cannot write: "), _atomic.AtomicOutput(path) as fh:
        yield fh
