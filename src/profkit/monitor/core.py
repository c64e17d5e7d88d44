"""The monitor's state: senders (bounded LRU), loss accounting, hottest functions.

:meth:`Monitor.feed` takes one datagram's bytes and returns what to show; it does no
I/O, so the receive loop, the views and the tests all drive the same code.
"""

from __future__ import annotations

from collections import OrderedDict
from itertools import islice

from profkit.monitor.accounting import SenderStats, Totals
from profkit.monitor.functions import FunctionTable
from profkit.wire import udp as protocol

_MARK = "\n" + protocol.THREAD_MARKER
#: Senders tracked individually; the least recently heard is folded into the totals.
MAX_SENDERS = 256


class Monitor:
    """Everything ``profkit monitor`` knows, in bounded memory."""

    def __init__(
        self, *, max_senders: int = MAX_SENDERS, functions: FunctionTable | None = None
    ) -> None:
        self.max_senders = max_senders
        self.senders: OrderedDict[str, SenderStats] = OrderedDict()
        self.evicted = Totals()
        self.functions = functions or FunctionTable()
        self.malformed = 0
        self.last_malformed = ""  #: why the latest malformed datagram was refused
        #: datagrams shown and counted but left out of the hot list (the loop fell behind)
        self.unanalysed = 0
        #: lines received and counted but not printed (the plain view's output was slow)
        self.unprinted = 0

    @property
    def sender_count(self) -> int:
        """Every sender seen, including those evicted from the table."""
        return len(self.senders) + self.evicted.senders

    def feed(
        self, data: bytes | bytearray | memoryview, now: float = 0.0, analyse: bool = True
    ) -> tuple[str, str] | None:
        """Account for one datagram; return ``(sender, body)`` to show, or None to skip it.

        ``analyse=False`` (the receive loop is behind, see :mod:`.server`): the datagram is
        checked, counted and shown, but its close lines do not go into the hot list — the
        part of the work that costs; for self times it is as if it had been lost.
        """
        try:
            sender, seq, dropped, body = protocol.split(data)
        except protocol.MalformedDatagram as exc:
            self.malformed += 1
            self.last_malformed = str(exc)
            return None
        stats = self.senders.get(sender)
        if stats is None:
            if len(self.senders) >= self.max_senders:
                _, old = self.senders.popitem(last=False)
                self.evicted.add(old)
            stats = self.senders[sender] = SenderStats(sender)
        else:
            self.senders.move_to_end(sender)
        lines = body.count("\n") + 1 if body else 0
        implausible = stats.implausible
        if not stats.accept(seq, dropped, lines, now):
            if stats.implausible != implausible:  # refused as garbage, not a duplicate
                self.malformed += 1
                self.last_malformed = f"implausible sequence number {seq} from {sender}"
            return None
        if body:
            if analyse:
                self._analyse(stats, body)
            else:
                self.unanalysed += 1
        return sender, body

    def _analyse(self, stats: SenderStats, body: str) -> None:
        """The body's close lines into the hot list, each thread's run of lines with that
        thread's depth sums (thread markers, docs/wire.md); a body without a marker is
        one run of the thread that wrote last."""
        if _MARK not in body and not body.startswith(protocol.THREAD_MARKER):
            self.functions.feed(body, stats.depths)
            return
        pieces = ("\n" + body).split(_MARK)
        if pieces[0]:
            self.functions.feed(pieces[0][1:], stats.depths)
        for piece in islice(pieces, 1, None):
            head, _, rest = piece.partition("\n")
            stats.switch(head.partition(" ")[0])
            if rest:
                self.functions.feed(rest, stats.depths)

    def totals(self) -> Totals:
        """Sums over every sender, current and evicted."""
        t = Totals(
            self.evicted.senders,
            self.evicted.received,
            self.evicted.lines,
            self.evicted.lost,
            self.evicted.dropped,
        )
        for s in self.senders.values():
            t.add(s)
        return t
