"""Many datagrams per system call (Linux ``sendmmsg(2)`` / ``recvmmsg(2)``), through ctypes.

Why: Python's socket module sends and receives one datagram a call, and each call
releases the GIL. In a profiled program the sending thread competes with the program's
own CPU-bound thread, so every released GIL costs it up to the interpreter's switch
interval (5 ms) before it runs again: a flush of hundreds of datagrams became hundreds
of waits, and the line queue grew. These calls are made with the GIL *held*
(``ctypes.PyDLL``), which is safe because they never block (``MSG_DONTWAIT``): a whole
batch goes out, or comes in, in one step.

Standard library only (ctypes): the sending side runs inside profiled programs. Where the
libc symbols are missing (not Linux, musl without them, a sandbox) :func:`libc_call`
returns None and the callers use the socket module.
"""

from __future__ import annotations

import ctypes
import sys
from typing import Any

#: ``MSG_DONTWAIT`` (Linux): never block, whatever the socket's mode.
MSG_DONTWAIT = 0x40
#: Room for any socket address (``sizeof(struct sockaddr_storage)``).
NAME_SIZE = 128


class IoVec(ctypes.Structure):
    """``struct iovec``."""

    _fields_ = (("base", ctypes.c_void_p), ("len", ctypes.c_size_t))


class MsgHdr(ctypes.Structure):
    """``struct msghdr`` (Linux layout)."""

    _fields_ = (
        ("name", ctypes.c_void_p),
        ("namelen", ctypes.c_uint32),
        ("iov", ctypes.POINTER(IoVec)),
        ("iovlen", ctypes.c_size_t),
        ("control", ctypes.c_void_p),
        ("controllen", ctypes.c_size_t),
        ("flags", ctypes.c_int),
    )


class MMsgHdr(ctypes.Structure):
    """``struct mmsghdr``: a message and the byte count the call filled in."""

    _fields_ = (("hdr", MsgHdr), ("len", ctypes.c_uint))


def libc_call(name: str) -> Any:
    """``name`` from the C library, called with the GIL held and errno kept; None if absent.

    Only for calls that never block (every caller passes ``MSG_DONTWAIT``): holding the
    GIL through a blocking call would stop every other thread of the program.
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        fn = getattr(ctypes.PyDLL(None, use_errno=True), name)
    except (OSError, AttributeError):
        return None
    fn.restype = ctypes.c_int
    return fn


def uint_field(msgs: ctypes.Array[MMsgHdr], offset: int) -> memoryview:
    """A writable view of one ``unsigned int`` field (at byte ``offset`` in each entry) of
    every entry of ``msgs``: the lengths filled in by the kernel are read from it, and
    ``namelen`` reset, without a ctypes object per entry."""
    stride = ctypes.sizeof(MMsgHdr) // 4
    return memoryview(msgs).cast("B").cast("I")[offset // 4 :: stride]


class MmsgSender:
    """``sendmmsg`` on a connected datagram socket: up to :attr:`batch` datagrams a call."""

    def __init__(self, fd: int, batch: int = 64) -> None:
        call = libc_call("sendmmsg")
        if call is None:
            raise OSError("sendmmsg is not available")
        call.argtypes = (ctypes.c_int, ctypes.c_void_p, ctypes.c_uint, ctypes.c_int)
        self._call = call
        self.batch = batch
        self._fd = fd
        self._iovecs = (IoVec * batch)()
        self._msgs = (MMsgHdr * batch)()
        for i in range(batch):
            self._msgs[i].hdr.iov = ctypes.pointer(self._iovecs[i])
            self._msgs[i].hdr.iovlen = 1
        self._address = ctypes.addressof(self._msgs)

    def send(self, datagrams: list[bytes]) -> tuple[int, int]:
        """Send the first up to :attr:`batch` of ``datagrams``: ``(how many went, errno)``;
        errno is 0 when all of those went, else why the next one did not."""
        count = min(len(datagrams), self.batch)
        iovecs = self._iovecs
        # c_char_p points at the bytes object's own buffer (no copy); ``keep`` holds them.
        keep = [ctypes.c_char_p(d) for d in datagrams[:count]]
        for i in range(count):
            iovecs[i].base = ctypes.cast(keep[i], ctypes.c_void_p).value
            iovecs[i].len = len(datagrams[i])
        sent = self._call(self._fd, self._address, count, MSG_DONTWAIT)
        if sent < 0:
            return 0, ctypes.get_errno()
        return sent, 0


class Recv:
    """``recv(fd, buf, size, MSG_DONTWAIT)`` with the GIL held: a sender's acknowledgement
    reads, each of which would otherwise release the GIL (and wait up to the switch
    interval to get it back from the program's busy thread)."""

    def __init__(self, fd: int, size: int) -> None:
        call = libc_call("recv")
        if call is None:
            raise OSError("recv is not available")
        call.argtypes = (ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
        call.restype = ctypes.c_ssize_t
        self._call = call
        self._fd = fd
        self._size = size
        self._buffer = ctypes.create_string_buffer(size)

    def __call__(self) -> bytes | None:
        """The next datagram queued (cut to ``size`` bytes), or None when there is none
        (or the socket has an error to report, such as an earlier send refused)."""
        n = self._call(self._fd, self._buffer, self._size, MSG_DONTWAIT)
        if n < 0:
            return None
        return self._buffer.raw[:n]
