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

import array
import contextlib
import ctypes
import errno
import os
import socket
import sys
from collections.abc import Callable, Hashable, Sequence

from profkit.settings import read as read_setting
from profkit.wire.mmsg import MSG_DONTWAIT, NAME_SIZE, IoVec, MMsgHdr, MsgHdr, libc_call, uint_field
from profkit.wire.udp import MAX_UDP_PAYLOAD

#: Datagrams taken per ``recvmmsg`` call (buffers: BATCH x 64 KB, 2 MB in all).
BATCH = 32
#: One buffer: one byte more than the largest UDP payload over IPv4, so a longer datagram
#: (IPv6) arrives too long and is refused as malformed instead of being silently cut.
SLOT = MAX_UDP_PAYLOAD + 1

#: ``SO_MEMINFO`` (Linux 3.5+): the socket's memory counters, receive queue bytes first.
_SO_MEMINFO = 55


class Receiver:
    """Calling it returns the datagrams queued on its non-blocking socket now (maybe
    none), as memoryviews of its own buffers, valid until the next call.

    :meth:`sources` says where each of the last call's datagrams came from (an opaque,
    hashable address) and :meth:`reply` sends a datagram back there without blocking:
    the monitor's acknowledgements (flow control, docs/wire.md).
    """

    def __call__(self) -> Sequence[memoryview]:
        raise NotImplementedError

    def sources(self, count: int) -> list[Hashable]:
        """The senders' addresses of the last call's first ``count`` datagrams."""
        raise NotImplementedError

    def reply(self, source: Hashable, data: bytes) -> None:
        """Send ``data`` to ``source`` if the socket takes it now; otherwise it is lost
        (an acknowledgement: the next one says the same and more)."""
        raise NotImplementedError


def receiver(sock: socket.socket, batch: int = BATCH) -> Receiver:
    """The batch receiver for non-blocking ``sock``: ``recvmmsg`` on Linux (unless
    ``PROFKIT_NO_RECVMMSG``), a ``recv_into`` loop elsewhere."""
    if sys.platform.startswith("linux") and not read_setting(os.environ, "no_recvmmsg"):
        try:
            return _MmsgReceiver(sock, batch)
        except OSError:
            pass  # no libc symbol (musl without it, a sandbox): the portable loop
    return _LoopReceiver(sock, batch)


class _LoopReceiver(Receiver):
    """``recvfrom_into`` until the queue is empty or ``batch`` datagrams were taken."""

    def __init__(self, sock: socket.socket, batch: int) -> None:
        self._sock = sock
        self._buffers = [bytearray(SLOT) for _ in range(batch)]
        self._views = [memoryview(b) for b in self._buffers]
        self._sources: list[Hashable] = []

    def __call__(self) -> list[memoryview]:
        out = []
        sources = self._sources
        sources.clear()
        recv = self._sock.recvfrom_into
        for buf, view in zip(self._buffers, self._views, strict=True):
            try:
                n, address = recv(buf)
            except (BlockingIOError, InterruptedError):
                break
            out.append(view[:n])
            sources.append(address)
        return out

    def sources(self, count: int) -> list[Hashable]:
        return self._sources[:count]

    def reply(self, source: Hashable, data: bytes) -> None:
        with contextlib.suppress(OSError):
            self._sock.sendto(data, source)  # type: ignore[call-overload]


class _MmsgReceiver(Receiver):
    """``recvmmsg(fd, msgs, batch, MSG_DONTWAIT, NULL)`` into one preallocated arena, the
    GIL held (it never blocks: a display thread does not delay it by 5 ms a call)."""

    def __init__(self, sock: socket.socket, batch: int) -> None:
        call = libc_call("recvmmsg")
        send = libc_call("sendto")
        if call is None or send is None:
            raise OSError("recvmmsg is not available")
        call.argtypes = (
            ctypes.c_int,
            ctypes.c_void_p,
            ctypes.c_uint,
            ctypes.c_int,
            ctypes.c_void_p,
        )
        send.argtypes = (
            ctypes.c_int,
            ctypes.c_char_p,
            ctypes.c_size_t,
            ctypes.c_int,
            ctypes.c_char_p,
            ctypes.c_uint32,
        )
        self._call = call
        self._send = send
        self._batch = batch
        self._arena = bytearray(SLOT * batch)
        self._names = bytearray(NAME_SIZE * batch)
        base = ctypes.addressof(ctypes.c_char.from_buffer(self._arena))
        names = ctypes.addressof(ctypes.c_char.from_buffer(self._names))
        self._iovecs = (IoVec * batch)()
        self._msgs = msgs = (MMsgHdr * batch)()
        for i in range(batch):
            self._iovecs[i].base = base + i * SLOT
            self._iovecs[i].len = SLOT
            msgs[i].hdr.iov = ctypes.pointer(self._iovecs[i])
            msgs[i].hdr.iovlen = 1
            msgs[i].hdr.name = names + i * NAME_SIZE
        # each message's received length and address length, read straight from the
        # array (no ctypes objects); the address lengths are reset before every call
        self._lengths = uint_field(msgs, MMsgHdr.len.offset)
        self._namelens = uint_field(msgs, MMsgHdr.hdr.offset + MsgHdr.namelen.offset)
        self._full_names = array.array("I", [NAME_SIZE]) * batch
        whole = memoryview(self._arena)
        self._slots = [whole[i * SLOT : (i + 1) * SLOT] for i in range(batch)]
        self._fd = sock.fileno()
        self._address = ctypes.addressof(msgs)

    def __call__(self) -> list[memoryview]:
        self._namelens[:] = self._full_names
        n = self._call(self._fd, self._address, self._batch, MSG_DONTWAIT, None)
        if n <= 0:
            if n < 0 and ctypes.get_errno() not in _AGAIN:
                err = ctypes.get_errno()
                raise OSError(err, os.strerror(err))
            return []
        lengths = self._lengths
        slots = self._slots
        return [slots[i][: lengths[i]] for i in range(n)]

    def sources(self, count: int) -> list[Hashable]:
        names = self._names
        lens = self._namelens
        return [
            bytes(names[i * NAME_SIZE : i * NAME_SIZE + min(lens[i], NAME_SIZE)])
            for i in range(count)
        ]

    def reply(self, source: Hashable, data: bytes) -> None:
        assert isinstance(source, bytes)
        self._send(self._fd, data, len(data), MSG_DONTWAIT, source, len(source))


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
