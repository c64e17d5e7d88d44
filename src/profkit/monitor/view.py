"""What ``profkit monitor`` prints: plain batched lines, a refreshed terminal screen, a summary."""

from __future__ import annotations

from collections import deque
from typing import TextIO

from profkit.monitor.core import Monitor
from profkit.report._fmt import fit, format_ns, printable

_CLEAR = "\x1b[H\x1b[2J"
#: Width for output that is not a terminal: nothing is cut.
UNLIMITED_WIDTH = 1 << 20


def prefixed(sender: str, body: str) -> str:
    """``body``'s lines each prefixed with ``[sender] `` (one C-level replace, not a loop)."""
    head = f"[{sender}] "
    return head + body.replace("\n", "\n" + head)


#: Characters of printed lines a plain view holds while its output is slow (a terminal,
#: a pipe nobody reads): beyond, lines are counted as not printed instead of growing
#: memory or making the receive loop wait for the output.
MAX_PENDING = 32 << 20


class PlainView:
    """Lines as they arrive, written in batches (one ``write`` per refresh, not per line).

    ``escape`` (on for a terminal): control characters in the lines are shown as escapes,
    since any machine that can send a datagram could otherwise drive the terminal. A
    file or pipe gets the lines as sent.

    :meth:`show` buffers (the receive loop's thread); :meth:`render` takes what is
    buffered as one text, which the display thread writes (:meth:`tick` does both).
    """

    def __init__(
        self, out: TextIO, *, quiet: bool = False, escape: bool = False, limit: int = MAX_PENDING
    ) -> None:
        self.out = out
        self.quiet = quiet
        self.escape = escape
        self.limit = limit
        self.pending: list[str] = []
        self._size = 0

    def show(self, monitor: Monitor, sender: str, body: str) -> None:
        if self.quiet or not body:
            return
        if self._size > self.limit:
            monitor.unprinted += body.count("\n") + 1
            return
        if self.escape:
            sender = printable(sender)
            if not body.replace("\n", "").isprintable():
                body = "\n".join(printable(line) for line in body.split("\n"))
        text = prefixed(sender, body) if monitor.sender_count > 1 else body
        self.pending.append(text)
        self.pending.append("\n")
        self._size += len(text) + 1

    def render(self, monitor: Monitor) -> str:
        """Everything buffered since the last call, as one text."""
        text = "".join(self.pending)
        self.pending.clear()
        self._size = 0
        return text

    def tick(self, monitor: Monitor) -> None:
        write(self.out, self.render(monitor))

    def close(self, monitor: Monitor) -> None:
        self.tick(monitor)


class ScreenView:
    """A screen redrawn a few times a second: senders, hottest functions, latest lines."""

    def __init__(
        self, out: TextIO, *, top: int, width: int, height: int, quiet: bool = False
    ) -> None:
        self.out = out
        self.top = top
        self.width = width
        self.height = height
        self.quiet = quiet
        self.tail: deque[str] = deque(maxlen=max(height, 10))

    def show(self, monitor: Monitor, sender: str, body: str) -> None:
        if self.quiet or not body:
            return
        self.tail.extend(
            prefixed(sender, body).split("\n") if monitor.sender_count > 1 else body.split("\n")
        )

    def render(self, monitor: Monitor) -> str:
        """The whole screen, cleared and redrawn."""
        head = summary(
            monitor,
            self.top,
            self.width,
            title="profkit monitor (Ctrl-C to stop)",
            max_senders=max(3, self.height // 4),
        )
        rows = head.splitlines()
        room = self.height - len(rows) - 2
        if room > 0 and not self.quiet:
            rows.append("latest lines:")
            rows.extend(fit(line, self.width) for line in list(self.tail)[-room:])
        return _CLEAR + "\n".join(rows) + "\n"

    def tick(self, monitor: Monitor) -> None:
        write(self.out, self.render(monitor))

    def close(self, monitor: Monitor) -> None:
        write(self.out, _CLEAR)


def write(out: TextIO, text: str) -> None:
    """``text`` to ``out``, flushed (nothing at all for no text)."""
    if text:
        out.write(text)
        out.flush()


def _cut(text: str, width: int) -> str:
    """``text`` cut on the right: a summary line's beginning says most."""
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"


def summary(
    monitor: Monitor,
    top: int,
    width: int = 80,
    *,
    title: str = "profkit monitor",
    max_senders: int | None = None,
) -> str:
    """Totals, one row per sender (the most recently heard ``max_senders``), hottest functions."""
    t = monitor.totals()
    out = [
        _cut(
            f"{title}: {t.senders} sender{'s' if t.senders != 1 else ''}, {t.received} datagrams, "
            f"{t.lines} lines, {t.lost} lost, {monitor.malformed} malformed, "
            f"{t.dropped} dropped at senders",
            width,
        )
    ]
    if monitor.senders:
        out.append(
            f"{'datagrams':>10} {'lines':>10} {'lost':>7} {'reord':>6} {'dropped':>8} "
            f"{'restart':>7}  sender"
        )
        senders = list(monitor.senders.values())
        if max_senders is not None and len(senders) > max_senders:
            senders = sorted(senders, key=lambda s: -s.last_seen)[:max_senders]
        for s in sorted(senders, key=lambda s: s.sender):
            cols = (
                f"{s.received:>10} {s.lines:>10} {s.lost:>7} {s.reordered:>6} {s.dropped:>8} "
                f"{s.restarts:>7}  "
            )
            out.append(cols + fit(s.sender, width - len(cols)))
        if len(senders) < len(monitor.senders):
            out.append(f"  (+{len(monitor.senders) - len(senders)} less recent senders not shown)")
        if monitor.evicted.senders:
            out.append(f"  (+{monitor.evicted.senders} older senders folded into the totals)")
    if monitor.unanalysed:
        out.append(
            _cut(
                f"hot list from {t.received - monitor.unanalysed} of {t.received} datagrams "
                "(the monitor fell behind: the rest were shown and counted, not analysed)",
                width,
            )
        )
    if monitor.unprinted:
        out.append(
            _cut(
                f"{monitor.unprinted} lines received and counted but not printed "
                "(the output was slower than the stream)",
                width,
            )
        )
    if monitor.malformed and monitor.last_malformed:
        out.append(_cut(f"last malformed datagram: {printable(monitor.last_malformed)}", width))
    hot = monitor.functions.top(top)
    if hot:
        out.append(
            "hottest functions (from Leave/Yield durations; self excludes callees, "
            "total counts recursion once):"
        )
        out.append(f"{'self':>9} {'total':>9} {'count':>9} {'longest':>9}  function")
        for name, own, total, count, longest in hot:
            cols = f"{format_ns(own):>9} {format_ns(total):>9} {count:>9} {format_ns(longest):>9}  "
            out.append(cols + fit(name, width - len(cols)))
    return "\n".join(out) + "\n"
