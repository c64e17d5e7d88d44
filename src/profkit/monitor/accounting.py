"""Per-sender loss accounting from sequence numbers, with bounded memory.

A sender numbers its datagrams 0, 1, 2, ... A jump forward means datagrams are missing;
they are remembered (up to :data:`REORDER_WINDOW` of them) so that one arriving late —
UDP may reorder — is taken back off the loss count instead of being called a duplicate.
A sequence number far *below* what was expected and near zero means the sender
restarted (same id, new run): its numbering starts over and is not counted as loss.

Sequence numbers come from the network, so they are checked before they are believed: a
jump forward of more than :data:`MAX_JUMP` datagrams (gigabytes of loss between two
datagrams of one sender) is implausible — garbage, or another program's traffic — and
the datagram is refused and counted (``implausible``) instead of adding an astronomic
number to ``lost``. A sender's *first* datagram may carry any number (the monitor may
have started long after it): it sets the baseline, and only a small head start is
counted as loss.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

from profkit.monitor.functions import DepthSums

#: How many missing sequence numbers are remembered for late (reordered) arrival.
REORDER_WINDOW = 1024
#: Largest believable forward jump of a sender's sequence number, in datagrams (a million
#: datagrams of up to 1,400 bytes: over a gigabyte lost between two datagrams).
MAX_JUMP = 1 << 20
#: Threads whose depth sums one sender keeps (beyond, all but the current are forgotten).
MAX_THREADS = 1024


@dataclass(slots=True)
class SenderStats:
    """What one sender's stream looked like so far."""

    sender: str
    received: int = 0  #: datagrams accepted
    lines: int = 0
    lost: int = 0  #: sequence numbers never seen (net of late arrivals)
    reordered: int = 0  #: datagrams that arrived after a later one
    duplicates: int = 0
    restarts: int = 0
    implausible: int = 0  #: datagrams refused for an unbelievable sequence number
    dropped_before: int = 0  #: dropped-at-sender totals of earlier runs (before restarts)
    dropped_now: int = 0  #: the sender's running count in the current run
    next_seq: int = 0
    last_seen: float = 0.0
    depths: DepthSums = field(default_factory=DepthSums, repr=False)  #: for self times
    #: the thread whose lines come now (its marker's id; "" before any marker) and each
    #: thread's depth sums: two threads' calls must not take time out of each other's
    thread: str = ""
    threads: dict[str, DepthSums] = field(default_factory=dict, repr=False)
    _missing: OrderedDict[int, None] = field(default_factory=OrderedDict, repr=False)

    def switch(self, thread: str) -> None:
        """A thread marker: the lines after it are ``thread``'s (docs/wire.md)."""
        if thread == self.thread:
            return
        threads = self.threads
        threads[self.thread] = self.depths
        if len(threads) > MAX_THREADS:  # a sender with endless short threads: bounded
            threads.clear()
        self.thread = thread
        self.depths = threads.get(thread) or DepthSums()

    @property
    def dropped(self) -> int:
        """Lines the sender itself could not send (its full socket buffer)."""
        return self.dropped_before + self.dropped_now

    def accept(self, seq: int, dropped: int, lines: int, now: float) -> bool:
        """Account for one datagram; False when it is a duplicate (to be ignored)."""
        self.last_seen = now
        expected = self.next_seq
        if seq - expected > MAX_JUMP:
            if self.received or seq < REORDER_WINDOW:
                self.implausible += 1
                return False
            # First datagram, far into the sender's run: the monitor joined late.
            expected = self.next_seq = seq
        if seq >= expected:
            if seq > expected:
                self._gap(expected, seq)
            self.next_seq = seq + 1
        elif seq in self._missing:
            del self._missing[seq]
            self.lost -= 1
            self.reordered += 1
        elif seq < REORDER_WINDOW <= expected - seq:
            self._restart(seq)
        else:
            self.duplicates += 1
            return False
        self.received += 1
        self.lines += lines
        # the sender's count only grows within a run; a reordered older value is smaller
        self.dropped_now = max(self.dropped_now, dropped)
        return True

    def _gap(self, first: int, end: int) -> None:
        self.lost += end - first
        missing = self._missing
        for s in range(max(first, end - REORDER_WINDOW), end):
            missing[s] = None
        while len(missing) > REORDER_WINDOW:
            missing.popitem(last=False)  # too old to arrive now: stays counted as lost

    def _restart(self, seq: int) -> None:
        self.restarts += 1
        self.dropped_before += self.dropped_now
        self.dropped_now = 0
        self._missing.clear()
        self.depths = DepthSums()
        self.thread, self.threads = "", {}
        self.lost += seq  # the new run's datagrams before this one never arrived
        for s in range(seq):
            self._missing[s] = None
        self.next_seq = seq + 1


@dataclass(slots=True)
class Totals:
    """Sums over senders that were evicted from the bounded sender table."""

    senders: int = 0
    received: int = 0
    lines: int = 0
    lost: int = 0
    dropped: int = 0

    def add(self, s: SenderStats) -> None:
        """Fold one sender's counts in (a sender evicted for memory keeps counting here)."""
        self.senders += 1
        self.received += s.received
        self.lines += s.lines
        self.lost += s.lost
        self.dropped += s.dropped
