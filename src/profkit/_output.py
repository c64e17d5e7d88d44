"""Checked writes: every byte profkit writes is either written or reported.

Why not ``open(..., "wb")`` or ``sys.stdout.buffer``: CPython's ``BufferedWriter``, given
more than its buffer holds, writes straight to the descriptor, and when the kernel takes
only part of it (a disk with 64 KiB left) and the next write fails with ENOSPC, the
error can be lost: ``report > full/x`` exited 0 with a 64 KiB file. :class:`CheckedFile`
calls ``os.write`` itself, loops over short writes, and raises ``OSError`` for anything
the kernel refuses or for a write that makes no progress.

The command line's funnel (:func:`profkit.cli.main.run_handler`) turns that ``OSError``
into one ``profkit: error:`` line and exit status 2. Standard library only.
"""

from __future__ import annotations

import errno
import io
import os
import sys

__all__ = ["CheckedFile", "stdout_file", "write_all", "write_stdout"]

#: Bytes collected before they are handed to the kernel.
BUFFER_BYTES = 256 * 1024


def write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    """Write every byte of ``data`` to ``fd``; raise ``OSError`` when that cannot be done."""
    view = memoryview(data).cast("B")
    while view:
        n = os.write(fd, view)
        if n <= 0:  # no progress and no error: a device that takes nothing
            raise OSError(errno.ENOSPC, "short write (nothing written)")
        view = view[n:]


class CheckedFile(io.RawIOBase):
    """A binary, buffered, write-only file over a descriptor, every write checked.

    ``write`` always takes all of its argument (it is buffered, then written in full by
    :func:`write_all`); errors surface at the latest from ``flush``/``close``.
    """

    def __init__(self, fd: int, *, closefd: bool = True, name: str = "") -> None:
        super().__init__()
        self._fd = fd
        self._closefd = closefd
        self._buf = bytearray()
        self.name = name

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def write(self, data: bytes | bytearray | memoryview) -> int:  # type: ignore[override]
        if self.closed:
            raise ValueError("write to a closed file")
        size = memoryview(data).nbytes
        if len(self._buf) + size >= BUFFER_BYTES:
            self._drain()
            if size >= BUFFER_BYTES:
                write_all(self._fd, data)
                return size
        self._buf += data
        return size

    def flush(self) -> None:
        if not self.closed:
            self._drain()

    def _drain(self) -> None:
        if self._buf:
            data, self._buf = self._buf, bytearray()
            write_all(self._fd, data)

    def close(self) -> None:
        if self.closed:
            return
        try:
            self._drain()
        finally:
            self._buf = bytearray()
            super().close()
            if self._closefd:
                os.close(self._fd)


def stdout_file() -> CheckedFile | None:
    """A checked writer over stdout's descriptor (``None`` when stdout has none, as
    under a test's ``io.StringIO``); anything already printed is flushed first."""
    stream = sys.stdout
    if stream is None:
        return None
    stream.flush()
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        return None
    return CheckedFile(fd, closefd=False, name="<stdout>")


def write_stdout(data: bytes) -> None:
    """Write ``data`` to stdout, checked; raises ``OSError`` (``BrokenPipeError`` for a
    reader that went away)."""
    out = stdout_file()
    if out is None:  # a text-only stream put in place by the caller (io.StringIO)
        stream = sys.stdout
        binary = getattr(stream, "buffer", None)
        if binary is not None:
            binary.write(data)
            binary.flush()
        elif stream is not None:
            stream.write(data.decode("utf-8", "surrogateescape"))
            stream.flush()
        return
    with out:
        out.write(data)
