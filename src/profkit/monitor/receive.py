"""Batch receive: every datagram already queued on a socket, in as few system calls as possible.

Why: at the network size (1,400 bytes, ~30 lines a datagram) a million lines a second is
~35,000 datagrams a second, and one ``recv_into`` each (a system call, a Python call and,
at the end of every burst, an exception) is a cost of its own next to the parsing.
Linux's ``recvmmsg(2)`` fills up to :data:`BATCH` buffers in one call; Python's socket
module does not offer it, so it is called through :mod:`ctypes` (standard library) on
Linux, and :func:`receiver` falls back to a ``recv_into`` loop anywhere else (or when
``PROFKIT_NO_RECVMMSG`` is set, which is how the tests drive both paths).

A receiver returns the datagrams as memoryviews of its own buffers: they are valid until
its next call, so the caller decodes (copies) each one before receiving again.
"""

from __future__ import annotations

import ctypes
import errno
import os
import socket
import sys
from collections.abc import Callable, Sequence

from profkit.wire.udp import MAX_UDP_PAYLOAD

#: Datagrams taken per ``recvmmsg`` call (buffers: BATCH x 64 KB, 2 MB in all).
BATCH = 32
#: One buffer: one byte more than the largest UDP payload over IPv4, so a longer datagram
#: (IPv6) arrives too long and is refused as malformed instead of being silently cut.
SLOT = MAX_UDP_PAYLOAD + 1

Receiver = Callable[[], Sequence[memoryview]]

#: ``SO_MEMINFO`` (Linux 3.5+): the socket's memory counters, receive queue bytes first.
_SO_MEMINFO = 55

_MSG_DONTWAIT = 0x40


class _IoVec(ctypes.Structure):
    _fields_ = (("base", ctypes.c_void_p), ("len", ctypes.c_size_t))


class _MsgHdr(ctypes.Structure):
    _fields_ = (
        ("name", ctypes.c_void_p),
        ("namelen", ctypes.c_uint32),
        ("iov", ctypes.POINTER(_IoVec)),
        ("iovlen", ctypes.c_size_t),
        ("control", ctypes.c_void_p),
        ("controllen", ctypes.c_size_t),
        ("flags", ctypes.c_int),
    )


class _MMsgHdr(ctypes.Structure):
    _fields_ = (("hdr", _MsgHdr), ("len", ctypes.c_uint))


def receiver(sock: socket.socket, batch: int = BATCH) -> Receiver:
    """A function returning the datagrams queued on non-blocking ``sock`` now (maybe none)."""
    if sys.platform.startswith("linux") and not os.environ.get("PROFKIT_NO_RECVMMSG"):
        try:
            return _mmsg_receiver(sock, batch)
        except (OSError, AttributeError):
            pass  # no libc symbol (musl without it, a sandbox): the portable loop
    return _loop_receiver(sock, batch)


def _loop_receiver(sock: socket.socket, batch: int) -> Receiver:
    """``recv_into`` until the queue is empty or ``batch`` datagrams were taken."""
    buffers = [bytearray(SLOT) for _ in range(batch)]
    views = [memoryview(b) for b in buffers]
    recv_into = sock.recv_into

    def receive() -> list[memoryview]:
        out = []
        for buf, view in zip(buffers, views, strict=True):
            try:
                n = recv_into(buf)
            except (BlockingIOError, InterruptedError):
                break
            out.append(view[:n])
        return out

    return receive


def _mmsg_receiver(sock: socket.socket, batch: int) -> Receiver:
    """``recvmmsg(fd, msgs, batch, MSG_DONTWAIT, NULL)`` into one preallocated arena."""
    libc = ctypes.CDLL(None, use_errno=True)
    call = libc.recvmmsg
    call.argtypes = (ctypes.c_int, ctypes.c_void_p, ctypes.c_uint, ctypes.c_int, ctypes.c_void_p)
    call.restype = ctypes.c_int
    arena = bytearray(SLOT * batch)
    base = ctypes.addressof(ctypes.c_char.from_buffer(arena))
    iovecs = (_IoVec * batch)()
    msgs = (_MMsgHdr * batch)()
    for i in range(batch):
        iovecs[i].base = base + i * SLOT
        iovecs[i].len = SLOT
        msgs[i].hdr.iov = ctypes.pointer(iovecs[i])
        msgs[i].hdr.iovlen = 1
    # each message's received length, read straight from the array (no ctypes objects)
    stride = ctypes.sizeof(_MMsgHdr) // 4
    lengths = memoryview(msgs).cast("B").cast("I")[_MMsgHdr.len.offset // 4 :: stride]
    whole = memoryview(arena)
    slots = [whole[i * SLOT : (i + 1) * SLOT] for i in range(batch)]
    fd = sock.fileno()
    msgs_address = ctypes.addressof(msgs)
    keep = (arena, iovecs, msgs)  # the C side points into these: kept by receive's default

    def receive(_keep: object = keep) -> list[memoryview]:
        n = call(fd, msgs_address, batch, _MSG_DONTWAIT, None)
        if n <= 0:
            if n < 0 and ctypes.get_errno() not in _AGAIN:
                err = ctypes.get_errno()
                raise OSError(err, os.strerror(err))
            return []
        return [slots[i][: lengths[i]] for i in range(n)]

    return receive


#: Nothing queued, or a signal arrived: the caller waits and calls again (PEP 475's spirit).
_AGAIN = frozenset({errno.EAGAIN, errno.EWOULDBLOCK, errno.EINTR})


def queue_fill(sock: socket.socket) -> Callable[[], float] | None:
    """A function telling how full ``sock``'s kernel receive queue is (0.0 to 1.0), or None
    where the kernel does not say (``SO_MEMINFO`` is Linux's).

    Why: the one sure sign that a receiver is about to lose datagrams is a queue close
    to its limit; a long busy spell is only a guess (a burst of the sender's may be
    long and harmless). One ``getsockopt``, a few microseconds: asked once per batch.
    """
    if not sys.platform.startswith("linux"):
        return None
    getsockopt = sock.getsockopt
    level = socket.SOL_SOCKET
    try:
        getsockopt(level, _SO_MEMINFO, 8)
    except OSError:
        return None

    def fill() -> float:
        raw = getsockopt(level, _SO_MEMINFO, 8)
        queued = int.from_bytes(raw[0:4], sys.byteorder)
        limit = int.from_bytes(raw[4:8], sys.byteorder)
        return queued / limit if limit else 0.0

    return fill
