"""Reading a file the user named (an assembly, a result file): regular files only.

``clr run FIFO`` and ``clr convert FIFO`` used to wait forever for a writer: ``open()``
of a FIFO blocks. The file is opened with ``O_NONBLOCK`` (never waits) and checked with
``fstat`` on that descriptor (no check-then-open race); anything but a regular file is
refused, and its size is checked against the caller's bound before a byte is read.
"""

from __future__ import annotations

import os
import stat

from profkit.errors import FormatError, UsageError


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def read_regular(path: str, max_bytes: int, what: str) -> bytes:
    """The bytes of regular file ``path``; :class:`UsageError` (one line naming the file)
    for anything else or an error opening or reading it, :class:`FormatError` (``too_large``)
    for a file over ``max_bytes``."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise UsageError(f"{path}: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = _kind(st.st_mode)
            raise UsageError(f"{path}: is {kind}, not {what} (profkit reads regular files)")
        if st.st_size > max_bytes:
            detail = f"{st.st_size} bytes is too large for {what} (at most {max_bytes})"
            raise FormatError("too_large", detail, path=path)
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb", closefd=True) as f:
            fd = -1
            return f.read(max_bytes + 1)
    except OSError as exc:
        raise UsageError(f"{path}: {exc.strerror or exc}") from None
    finally:
        if fd >= 0:
            os.close(fd)
