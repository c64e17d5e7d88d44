"""Opening an input safely: one place that decides what profkit will read and how much.

Every reader of a user-named file (saved profiles, perf maps, LLVM profiles) goes through
:func:`open_input`, because the failures an audit found were all in *opening*, not in
parsing: a FIFO without a writer hung every reader, ``/dev/zero`` and ``/dev/urandom``
were read for gigabytes before "bad magic", a 4 GB file was read whole to look at its
first bytes, a 466 KB gzip bomb grew to 1 GiB in memory.

The rules, in order:

* ``-`` is stdin (reading it is the point), with the same size cap as a file; a terminal
  or a character device behind it is refused (``< /dev/zero``).
* A path is opened with ``O_NONBLOCK`` (opening a FIFO never waits for a writer), then
  checked with ``fstat`` on the open descriptor (no check-then-open race): a directory or
  a device is refused with a clear message; a FIFO or socket is read only if a writer is
  there (``profkit report <(zcat run.json.gz)``) or comes within :data:`FIFO_GRACE_S`,
  otherwise refused.
* A regular file's size is compared with the reader's cap before a byte is read.
* Readers look at :meth:`Input.prefix` (at most :data:`PREFIX_BYTES`) to decide what the
  file is, then read the rest with :meth:`Input.read_all` (capped) or in chunks.
* :func:`gunzip` decompresses a stream with a size cap and a ratio cap.

Errors are :class:`InputError` (a :class:`~profkit.errors.ProfkitError`: one line, exit
status 2), or the reader's own :class:`~profkit.errors.FormatError` class for "too large".
Standard library only.
"""

from __future__ import annotations

import errno
import os
import stat
import sys
import zlib
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import Any, BinaryIO

from profkit.errors import FormatError, ProfkitError

__all__ = [
    "CHUNK_BYTES",
    "FIFO_GRACE_S",
    "MAX_GZIP_RATIO",
    "PREFIX_BYTES",
    "Input",
    "InputError",
    "gunzip",
    "open_input",
    "read_input",
]

#: What readers get to sniff before deciding what a file is.
PREFIX_BYTES = 64 * 1024
#: Read size for streaming.
CHUNK_BYTES = 1 << 20
#: Largest expansion accepted from gzip data once the output passes
#: :data:`GZIP_RATIO_FLOOR` bytes. Profiles compress 5-30x; bombs 1000x.
MAX_GZIP_RATIO = 200
#: Below this much output the ratio is not checked (tiny files compress oddly).
GZIP_RATIO_FLOOR = 16 << 20
#: How long a FIFO nobody writes to is watched for a writer before it is refused.
FIFO_GRACE_S = 2.0
_GZIP_MAGIC = b"\x1f\x8b"


class InputError(ProfkitError):
    """An input that cannot or should not be read (missing, a directory, a device...)."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: {reason}")


def _display(path: str) -> str:
    return "stdin" if path == "-" else path


class Input:
    """An open input: a name for messages, its size when known, a sniffable prefix."""

    def __init__(self, path: str, fh: BinaryIO, size: int | None, pending: bytes = b"") -> None:
        self.path = path
        self.name = _display(path)
        self.size = size  #: a regular file's size, else ``None``
        self._fh = fh
        self._pending = pending
        self._consumed = 0

    # -- reading -------------------------------------------------------------------------

    def prefix(self, n: int = PREFIX_BYTES) -> bytes:
        """Up to the first ``n`` bytes (fewer only at end of input), not consumed."""
        while len(self._pending) < n:
            chunk = self._raw_read(n - len(self._pending))
            if not chunk:
                break
            self._pending += chunk
        return self._pending[:n]

    def read(self, n: int) -> bytes:
        """Up to ``n`` bytes (fewer only at end of input)."""
        if self._pending:
            out, self._pending = self._pending[:n], self._pending[n:]
            if len(out) < n:
                out += self._read_exact(n - len(out))
        else:
            out = self._read_exact(n)
        self._consumed += len(out)
        return out

    def chunks(self, size: int = CHUNK_BYTES) -> Iterator[bytes]:
        """The rest of the input in pieces of at most ``size`` bytes."""
        while True:
            chunk = self.read(size)
            if not chunk:
                return
            yield chunk

    def read_all(self, limit: int, error: type[FormatError] = FormatError) -> bytes:
        """The whole rest of the input; more than ``limit`` bytes raises ``error``
        (kind ``too_large``) after reading at most ``limit + 1`` bytes."""
        self.check_size(limit, error)
        before = self._consumed
        data = self.read(max(limit + 1 - before, 0))
        if before + len(data) > limit:
            raise error("too_large", f"larger than {limit} bytes", path=self.name)
        return data

    def check_size(self, limit: int, error: type[FormatError] = FormatError) -> None:
        """Refuse a regular file bigger than ``limit`` before reading it."""
        if self.size is not None and self.size > limit:
            raise error(
                "too_large", f"{self.size} bytes, larger than the {limit} accepted", path=self.name
            )

    def _read_exact(self, n: int) -> bytes:
        parts: list[bytes] = []
        left = n
        while left > 0:
            chunk = self._raw_read(min(left, CHUNK_BYTES))
            if not chunk:
                break
            parts.append(chunk)
            left -= len(chunk)
        return b"".join(parts)

    def _raw_read(self, n: int) -> bytes:
        try:
            return self._fh.read(n) or b""
        except OSError as exc:
            raise InputError(self.name, f"cannot read: {exc.strerror or exc}") from None

    # -- lifetime ------------------------------------------------------------------------

    def close(self) -> None:
        if self.path != "-":
            self._fh.close()

    def __enter__(self) -> Input:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def open_input(path: str, *, what: str = "file") -> Input:
    """Open ``path`` (``-`` for stdin) for reading under the module's rules.

    ``what`` names the expected content in messages ("profile", "perf map").
    """
    if path == "-":
        return _open_stdin(what)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    flags |= getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        if os.path.lexists(path):
            raise InputError(path, "a symbolic link to a file that does not exist") from None
        raise InputError(path, "no such file") from None
    except IsADirectoryError:
        raise InputError(path, f"is a directory, not a {what}") from None
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # a socket file, or a FIFO open refused
            raise InputError(path, f"is not a regular file (not a {what})") from None
        raise InputError(path, f"cannot open: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        mode = st.st_mode
        if stat.S_ISREG(mode):
            os.set_blocking(fd, True)
            return Input(path, os.fdopen(fd, "rb", buffering=0), st.st_size)
        if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
            first = _probe_writer(fd, path)
            os.set_blocking(fd, True)
            return Input(path, os.fdopen(fd, "rb", buffering=0), None, first)
        raise InputError(path, f"is {_kind(mode)}, not a {what}; profkit reads regular files")
    except BaseException:
        os.close(fd)
        raise


def _probe_writer(fd: int, path: str) -> bytes:
    """What a non-blocking FIFO holds now; refuse it if no writer comes.

    End of input at once means no writer *yet*: a writer about to open (a thread, a
    shell pipeline starting up) gets :data:`FIFO_GRACE_S` to appear, watched with
    ``poll`` (Linux reports no hang-up for a FIFO nobody ever opened for writing).
    """
    first = _read_nonblocking(fd, path)
    if first is None or first:
        return first or b""
    import select

    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLHUP)
    if poller.poll(int(FIFO_GRACE_S * 1000)):
        return _read_nonblocking(fd, path) or b""  # b"": the writer wrote nothing
    raise InputError(path, "is a FIFO with no writer (nothing to read)")


def _read_nonblocking(fd: int, path: str) -> bytes | None:
    try:
        return os.read(fd, PREFIX_BYTES)
    except BlockingIOError:
        return None  # a writer is there, nothing written yet: reading may wait for it
    except OSError as exc:
        raise InputError(path, f"cannot read: {exc.strerror or exc}") from None


def _open_stdin(what: str) -> Input:
    stream: Any = sys.stdin
    if stream is None:
        raise InputError("stdin", "no standard input")
    binary: BinaryIO = getattr(stream, "buffer", stream)
    size: int | None = None
    try:
        fd = binary.fileno()
    except (AttributeError, OSError, ValueError):
        fd = -1  # an in-memory stream put in place by a caller (tests)
    if fd >= 0:
        try:
            st = os.fstat(fd)
        except OSError as exc:
            raise InputError("stdin", f"cannot read: {exc.strerror or exc}") from None
        if stat.S_ISREG(st.st_mode):
            size = max(st.st_size - _tell(fd), 0)
        elif stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
            if os.isatty(fd):
                raise InputError("stdin", f"is a terminal; pipe a {what} into it or name a file")
            raise InputError("stdin", f"is {_kind(st.st_mode)}, not a {what}")
        elif stat.S_ISDIR(st.st_mode):
            raise InputError("stdin", f"is a directory, not a {what}")
    return Input("-", binary, size)


def _tell(fd: int) -> int:
    try:
        return os.lseek(fd, 0, os.SEEK_CUR)
    except OSError:
        return 0


def read_input(
    path: str,
    limit: int,
    error: type[FormatError] = FormatError,
    *,
    what: str = "file",
    sniff: Callable[[bytes, str], None] | None = None,
) -> bytes:
    """The whole of ``path`` (or stdin), at most ``limit`` bytes, under the module's rules.

    ``sniff(prefix, name)``, when given, sees the first :data:`PREFIX_BYTES` and raises to
    refuse the input before the rest is read (``cat /dev/zero | profkit ...``)."""
    with open_input(path, what=what) as inp:
        inp.check_size(limit, error)
        if sniff is not None:
            sniff(inp.prefix(), inp.name)
        return inp.read_all(limit, error)


def is_gzip(prefix: bytes) -> bool:
    """Whether bytes start like a gzip member."""
    return prefix[:2] == _GZIP_MAGIC


def gunzip(
    chunks: Iterator[bytes],
    *,
    limit: int,
    name: str,
    error: type[FormatError] = FormatError,
    max_ratio: int = MAX_GZIP_RATIO,
    ratio_floor: int = GZIP_RATIO_FLOOR,
) -> Iterator[bytes]:
    """Decompress gzip data (concatenated members too) as it arrives, in bounded pieces.

    Raises ``error`` when the output passes ``limit`` bytes, or passes ``ratio_floor``
    bytes at more than ``max_ratio`` times the input read so far: a bomb is stopped
    after a few MB of work, not after it filled memory. Trailing garbage after a member
    is ignored, as gzip(1) does.
    """
    dec = zlib.decompressobj(wbits=31)
    consumed = produced = 0
    carry = b""  # input after a finished member, too short yet to tell what it is
    for chunk in chunks:
        consumed += len(chunk)
        data = carry + chunk
        carry = b""
        while data:
            if dec.eof:  # between members: another member, or trailing garbage
                if len(data) < 2:
                    carry = data
                    break
                if data[:2] != _GZIP_MAGIC:
                    return
                dec = zlib.decompressobj(wbits=31)
            try:
                out = dec.decompress(data, CHUNK_BYTES)
            except zlib.error as exc:
                raise error("malformed", f"bad gzip data: {exc}", path=name) from None
            data = dec.unused_data if dec.eof else dec.unconsumed_tail
            if out:
                produced += len(out)
                _check(produced, consumed, limit, max_ratio, ratio_floor, name, error)
                yield out
    if not dec.eof:
        raise error("truncated", "gzip stream ends early", path=name)


def _check(
    produced: int,
    consumed: int,
    limit: int,
    max_ratio: int,
    floor: int,
    name: str,
    error: type[FormatError],
) -> None:
    if produced > limit:
        raise error("too_large", f"decompresses to more than {limit} bytes", path=name)
    if produced > floor and produced > max_ratio * max(consumed, 1):
        raise error(
            "too_large",
            f"gzip data expands more than {max_ratio}x ({consumed} bytes gave over "
            f"{produced}): refused as a decompression bomb",
            path=name,
        )
