"""Where event lines go: a text stream (stderr or a file) and/or UDP datagrams.

The profiler's hot path only hands a finished line to :meth:`LineFlusher.append`: a
length check and a :class:`collections.deque` append (atomic under the GIL, so no lock
and no lost line when a flush runs concurrently). The queue is bounded *there*: a line
arriving when :attr:`LineFlusher.max_queued` lines wait is dropped and counted, so memory
stays bounded however far the sending falls behind. A background thread drains the
queue in chunks every few milliseconds (and at shutdown) and hands them to each sink.

The program never waits for a terminal or a network. The UDP socket is non-blocking;
a monitor that acknowledges (docs/wire.md, "Flow control") sets how many bytes may be in
flight, and the sender holds the rest in its queue instead of overflowing the monitor's
receive buffer, where it would be lost unseen. Every line not sent is counted once and
the count travels in the next datagram's header, so the monitor shows loss that
happened before the network.
"""

from __future__ import annotations

import itertools
import os
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import IO, Protocol

from profkit import _streamfile as streamfile
from profkit.profilers.elt.udp_sender import UdpSender
from profkit.wire.udp import THREAD_MARKER

__all__ = ["THREAD_MARKER", "LineFlusher", "Sink", "TextSink", "UdpSender", "thread_marker"]


class Sink(Protocol):
    def write_lines(self, lines: list[str]) -> None: ...

    def close(self) -> None: ...


class TextSink:
    """Event lines to a text stream (``stderr``) or to a file opened for writing."""

    def __init__(self, target: str) -> None:
        self._owned = target != "stderr"
        self._out: IO[str] = sys.stderr
        if self._owned:
            # {pid}: child processes get their own file (see export.destination.child_template). The
            # runner's checked file when it opened one, never the path reopened.
            path = target.replace("{pid}", str(os.getpid()))
            self._out = streamfile.take(path) or streamfile.open_stream(path)

    def write_lines(self, lines: list[str]) -> None:
        try:
            self._out.write("\n".join(lines) + "\n")
            self._out.flush()
        except (OSError, ValueError):
            pass  # a closed/broken stream must not break the profiled program

    def close(self) -> None:
        if self._owned:
            self._out.close()


def thread_marker(tid: int, name: str) -> str:
    """``Thread: 1234 MainThread``: the lines after it, up to the next marker, are that
    thread's (docs/elt.md; the OS thread id, as every report and export names threads).
    At indent 0 and without ``, Duration: ``, so readers that know only the event lines
    (an older monitor) pass over it."""
    clean = " ".join(name.split())
    return f"{THREAD_MARKER}{tid} {clean}" if clean else f"{THREAD_MARKER}{tid}"


class LineFlusher:
    """Takes the profiler's lines (:meth:`append`) and drains them into the sinks on a
    daemon thread, in chunks, as fast as the sinks take them."""

    #: Seconds between drains while lines flow, and while none came last time.
    BUSY_PERIOD = 0.005
    IDLE_PERIOD = 0.05
    #: Seconds ``close`` waits for a slow monitor to take what is left.
    CLOSE_TIMEOUT = 5.0

    def __init__(
        self,
        sinks: list[Sink],
        *,
        period: float | None = None,
        max_queued: int = 200_000,
        chunk: int = 16384,
    ) -> None:
        self.queue: deque[tuple[int, str]] = deque()
        self.sinks = sinks
        self.max_queued = max_queued
        self._udp = next((s for s in sinks if isinstance(s, UdpSender)), None)
        self._busy = self.BUSY_PERIOD if period is None else period
        self._idle = self.IDLE_PERIOD if period is None else period
        self._chunk = chunk
        self._drops = itertools.count()  # next() is atomic: the program's threads count
        self._drop_reads = 0
        self._dropped = 0  # the queue's drops (as of the last read) + lines left at close
        self._left_at_close = 0
        self._reported = 0  # of which the UDP sender was told
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._last_thread: int | None = None  # whose lines the sinks got last
        self._markers: dict[int, str] = {}
        #: Python ident -> (OS thread id, name), taken when the thread first wrote
        self._threads: dict[int, tuple[int, str]] = {}
        self.thread: threading.Thread | None = None
        self.append = self._capped_append()

    def _capped_append(self) -> Callable[[str], None]:
        """The profiler's emit: queue the line, or count it dropped when the queue is full.

        Checked here, at enqueue time, so the queue never holds more than
        :attr:`max_queued` lines; the newest line is the one dropped (the flusher may be
        taking the oldest at this moment). One length check and one append (C calls)."""
        size = self.queue.__len__
        put = self.queue.append
        drop = self._drops.__next__
        cap = self.max_queued
        ident = threading.get_ident  # pthread_self: get_native_id is a system call
        threads = self._threads

        def append(line: str) -> None:
            if size() < cap:
                tid = ident()
                if tid not in threads:  # once per thread: a short one is gone by the drain
                    threads[tid] = (threading.get_native_id(), threading.current_thread().name)
                put((tid, line))  # one append: the thread travels with its line
            else:
                drop()

        return append

    @property
    def dropped(self) -> int:
        """Lines dropped because the queue was full (or still queued when it closed)."""
        with self._lock:
            self._count_drops()
            return self._dropped

    def _count_drops(self) -> None:
        # next() returns how many next() calls came before: the program's drops plus
        # this method's own reads (caller holds the lock)
        self._dropped = next(self._drops) - self._drop_reads + self._left_at_close
        self._drop_reads += 1

    def start(self) -> None:
        self.thread = threading.Thread(target=self._run, name="profkit-lines", daemon=True)
        self.thread.profkit_internal = True  # type: ignore[attr-defined]  # collector: skip it
        self.thread.start()

    def _run(self) -> None:
        udp = self._udp
        while not self._stop.is_set():
            moved = self.flush()
            if udp is not None and not udp.ready():
                udp.wait(self._busy)  # an acknowledgement opens the window
            else:
                self._stop.wait(self._busy if moved else self._idle)

    def flush(self) -> int:
        """Hand queued lines to the sinks while they take them (thread-safe; callable
        from any thread); returns how many."""
        with self._lock:
            self._count_drops()
            udp = self._udp
            if udp is not None and self._dropped != self._reported:
                udp.add_dropped(self._dropped - self._reported)
                self._reported = self._dropped
            queue = self.queue
            pop = queue.popleft
            moved = 0
            while True:
                if udp is not None:
                    udp.pump()
                    if not udp.ready():
                        break  # the monitor's window is full: lines wait in the queue
                count = min(len(queue), self._chunk)
                if not count:
                    break
                lines = self._marked([pop() for _ in range(count)])
                moved += count
                for sink in self.sinks:
                    sink.write_lines(lines)
            return moved

    def _marked(self, items: list[tuple[int, str]]) -> list[str]:
        """The lines, with a :func:`thread_marker` line wherever the thread changes
        (issue #25 item 12: two threads' lines interleaved at one indentation). The lines
        before the first marker are the thread that wrote first: a program that streams
        from one thread gets the stream it always got. Done here, on the flusher's side,
        in the queue's order: the program's threads only tag each line with their ident
        (one append, atomic), so no line can land under another thread's marker. A
        reused ident (a thread ended, another began) keeps its first OS id and name: a
        marker can then be stale, never wrong about which lines belong together."""
        out: list[str] = []
        add = out.append
        last = self._last_thread
        for tid, line in items:
            if tid != last:
                if last is not None:
                    add(self._marker(tid))
                last = tid
            add(line)
        self._last_thread = last
        return out

    def _marker(self, tid: int) -> str:
        found = self._markers.get(tid)
        if found is None:
            native, name = self._threads.get(tid, (tid, ""))
            found = self._markers[tid] = thread_marker(native, name)
        return found

    def close(self) -> None:
        """Stop the thread, send what is left (waiting up to :attr:`CLOSE_TIMEOUT` for a
        slow monitor), count the rest as dropped, close the sinks."""
        self._stop.set()
        if self.thread is not None and self.thread is not threading.current_thread():
            self.thread.join(timeout=2.0)
        udp = self._udp
        deadline = time.monotonic() + self.CLOSE_TIMEOUT
        self.flush()
        while udp is not None and not udp.ready() and time.monotonic() < deadline:
            udp.wait(0.01)
            self.flush()
        with self._lock:
            self._left_at_close += len(self.queue)
            self.queue.clear()
            self._count_drops()
            if udp is not None and self._dropped != self._reported:
                udp.add_dropped(self._dropped - self._reported)
                self._reported = self._dropped
        for sink in self.sinks:
            sink.close()


def open_sinks(
    stream: str | None, udp: tuple[str, int] | None
) -> tuple[LineFlusher, UdpSender | None]:
    """The started flusher of the event lines' sinks (``--stream``, ``--udp``; at least
    one given), and the UDP sender among them (its counts go in the metadata)."""
    sinks: list[Sink] = [TextSink(stream)] if stream else []
    sender = UdpSender(udp) if udp is not None else None
    if sender is not None:
        sinks.append(sender)
    flusher = LineFlusher(sinks)
    flusher.start()
    return flusher, sender
