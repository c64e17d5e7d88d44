"""File input and atomic output for the perf-map family.

Inputs are read whole (maps are text of at most tens of MB; at most
:data:`MAX_INPUT_BYTES`) or line by line with a cap on the line length; ``-`` means stdin. Outputs
go to a temporary file in the destination directory and are renamed over the target,
so a crash never leaves a half-written map where ``perf`` would read it.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import BinaryIO, Protocol

from profkit import _atomic, _inputs
from profkit.errors import FormatError

__all__ = [
    "atomic_output",
    "iter_lines",
    "open_stream",
    "read_input",
    "write_atomic",
]


#: Largest input read whole (a 10-million-entry map is ~1 GB): ``show /dev/zero`` or a
#: wrong file must end in one error, not in the kernel's OOM killer (it took 24 GB).
MAX_INPUT_BYTES = 1 << 30
#: Longest line handed on by :func:`iter_lines`; a longer one comes in pieces.
MAX_LINE_BYTES = 1 << 20


def read_input(path: str, error: type[FormatError]) -> bytes:
    """Read ``path`` (or stdin for ``-``), at most :data:`MAX_INPUT_BYTES`, through
    :func:`profkit._inputs.open_input`: devices and directories are refused, a FIFO
    without a writer never blocks, a regular file's size is checked before reading."""
    return _inputs.read_input(
        path, MAX_INPUT_BYTES, error, what="map or image", sniff=_text_or_image(error)
    )


def _text_or_image(error: type[FormatError]) -> Callable[[bytes, str], None]:
    """Maps are text and images start with ``MZ``: NUL bytes in the first 64 KiB of
    anything else (``cat /dev/zero |``) refuse it before 1 GiB is read."""

    def sniff(prefix: bytes, name: str) -> None:
        if not prefix.startswith(b"MZ") and b"\0" in prefix:
            raise error(
                "malformed",
                "binary data (a NUL byte) in the first 64 KiB: not a perf map",
                path=name,
                offset=prefix.index(b"\0"),
            )

    return sniff


def open_stream(path: str) -> _inputs.Input:
    """``path`` (or stdin) opened for streaming, under the same rules: ``symbolize
    /dev/zero`` is refused instead of filling the disk with an endless output."""
    return _inputs.open_input(path, what="perf script text")


class _Readable(Protocol):
    def read(self, n: int, /) -> bytes: ...


def iter_lines(fh: BinaryIO | _Readable) -> Iterator[bytes]:
    """The lines of ``fh`` (each with its newline) with bounded memory: a line longer than
    :data:`MAX_LINE_BYTES` (``/dev/zero`` has one endless line) comes in pieces."""
    readline = getattr(fh, "readline", None)
    if readline is not None:
        yield from iter(functools.partial(readline, MAX_LINE_BYTES), b"")
        return
    buf = b""
    while True:
        chunk = fh.read(1 << 16)
        if not chunk:
            break
        buf += chunk
        start = 0
        while True:
            end = buf.find(b"\n", start)
            if end < 0:
                break
            line = buf[start : end + 1]
            start = end + 1
            while len(line) > MAX_LINE_BYTES:
                yield line[:MAX_LINE_BYTES]
                line = line[MAX_LINE_BYTES:]
            yield line
        buf = buf[start:]
        while len(buf) > MAX_LINE_BYTES:
            yield buf[:MAX_LINE_BYTES]
            buf = buf[MAX_LINE_BYTES:]
    if buf:
        yield buf


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
