"""The UDP wire format between a profiler's live stream and ``profkit monitor``.

The full specification, for producers written in other languages (the .NET profiler's
C code), is ``docs/wire.md``; this module is its reference implementation.

One datagram is UTF-8 text: a header line, then event lines exactly as the ELT profiler
prints them (``Enter: NAME`` / ``Leave: NAME, Duration: …``, four spaces per depth)::

    PK1 <sender> <seq> <dropped>
    Enter: myapp.main
        Enter: myapp.work
        Leave: myapp.work, Duration: 12.250 us

* ``sender`` identifies the stream (``host/pid``, no spaces) so one monitor can tell many
  senders apart; ``seq`` counts datagrams per sender from 0, so gaps reveal loss;
  ``dropped`` is the running count of lines the sender could not send (full socket
  buffer), so loss before the network is visible too.
* Flow control (optional, both ways compatible): a monitor answers a sender's datagrams
  with small acknowledgements (``PK1A <sender> <next_seq> <window>``, :func:`encode_ack`):
  every datagram below ``next_seq`` has been taken off its socket, and at most ``window``
  bytes may be on the way. A sender that has heard one keeps its datagrams in flight
  under the window and holds the rest (its own queue, counted drops when full) instead
  of overflowing the monitor's receive buffer; a sender that ignores them, or a monitor
  that never sends them, works as before.
* Datagrams stay at or under :data:`MAX_DATAGRAM` bytes so they are never fragmented on
  an Ethernet-sized MTU; to a loopback address, at or under :data:`MAX_LOOPBACK_DATAGRAM`
  (loopback has a 64 KB MTU, and a few big datagrams cost the receiver far less than
  many small ones); a single over-long line is cut to fit.
"""

from __future__ import annotations

from profkit._record import record

MAGIC = "PK1"
#: The acknowledgement's magic (monitor to sender).
ACK_MAGIC = "PK1A"
#: 1500-byte Ethernet MTU − 20 (IPv4) − 8 (UDP) − slack for IP options/tunnels.
#: Start of a thread marker line (docs/wire.md): the event lines after it, up to the next
#: marker, are that thread's. Every datagram whose first line is not a marker repeats the
#: last one before it (:func:`pack`), so a datagram read alone (its predecessor lost)
#: still says whose lines it holds.
THREAD_MARKER = "Thread: "
_MARKER = b"\n" + THREAD_MARKER.encode()
MAX_DATAGRAM = 1400
#: To a loopback address: nothing is fragmented below the 64 KB loopback MTU.
MAX_LOOPBACK_DATAGRAM = 16384
_MAX_HEADER = 64
#: Bytes reserved for a datagram's header line (sender id included).
MAX_HEADER = _MAX_HEADER
#: Smallest window a sender honours (a monitor's smaller value would stall it).
MIN_WINDOW = 64 << 10


@record(frozen=True)
class Datagram:
    """One decoded datagram: its header fields and its event lines."""

    sender: str
    seq: int
    dropped: int
    lines: tuple[str, ...]


class MalformedDatagram(ValueError):
    """A datagram that is not in this format (counted and ignored by the monitor)."""


def encode(sender: str, seq: int, dropped: int, lines: list[str]) -> bytes:
    """One datagram holding ``lines`` (caller keeps the batch under :data:`MAX_DATAGRAM`)."""
    header = f"{MAGIC} {sender} {seq} {dropped}"
    return ("\n".join([header, *lines])).encode("utf-8", "replace")


def batch(
    lines: list[str], header_len: int = _MAX_HEADER, max_datagram: int = MAX_DATAGRAM
) -> list[list[str]]:
    """Split ``lines`` into batches whose encoded datagram fits ``max_datagram`` bytes."""
    budget = max_datagram - header_len
    batches: list[list[str]] = []
    current: list[str] = []
    size = 0
    for line in lines:
        # An ASCII str's length is its UTF-8 size (isascii() is O(1)): event lines almost
        # always are, so most lines are never encoded twice.
        raw = (len(line) if line.isascii() else len(line.encode("utf-8", "replace"))) + 1
        if raw > budget:
            line = line.encode("utf-8", "replace")[: budget - 4].decode("utf-8", "ignore") + "…"
            raw = len(line.encode("utf-8")) + 1
        if current and size + raw > budget:
            batches.append(current)
            current, size = [], 0
        current.append(line)
        size += raw
    if current:
        batches.append(current)
    return batches


def pack(
    lines: list[str], header_len: int = _MAX_HEADER, max_datagram: int = MAX_DATAGRAM
) -> list[bytes]:
    """``lines`` as datagram bodies, each ``b"\\n"`` + lines joined (a body's line count is
    its count of newlines, worked out only when needed: it is a scan), the same
    cut as :func:`batch`'s: a body is at most ``max_datagram - header_len`` bytes; a
    longer line is cut to fit and ends in "…". A datagram is a header plus a body
    (:func:`with_header`).

    Why not :func:`batch`: that looks at every line in Python (a third of a microsecond
    each, on the profiled program's own CPU at a million lines a second). Here the lines
    are joined and encoded once, and cut at the last newline that fits with
    ``bytes.rfind``: the Python work is per datagram, not per line.

    A body that does not begin with a thread marker (:data:`THREAD_MARKER`) begins with
    a copy of the last marker before it, when there was one.
    """
    if not lines:
        return []
    data = ("\n" + "\n".join(lines)).encode("utf-8", "replace")
    out: list[bytes] = []
    pos, end = 0, len(data)
    marker = b""  # the last thread marker line already sent (b"\nThread: ...")
    while pos < end:
        repeat = marker if marker and not data.startswith(_MARKER, pos) else b""
        budget = max_datagram - header_len - len(repeat)
        if end - pos <= budget:
            out.append(repeat + data[pos:])
            break
        cut = data.rfind(b"\n", pos + 1, pos + budget + 1)  # where the next line begins
        if cut < 0:  # one line longer than a datagram: cut it (UTF-8-safe) on its own
            cut = data.find(b"\n", pos + 1)
            if cut < 0:
                cut = end
            line = data[pos + 1 : cut][: budget - 4].decode("utf-8", "ignore") + "…"
            out.append(repeat + b"\n" + line.encode("utf-8"))
        else:
            out.append(repeat + data[pos:cut])
        found = data.rfind(_MARKER, pos, cut)  # within this body: linear over the data
        if found >= 0:
            stop = data.find(b"\n", found + 1, cut)
            marker = data[found : cut if stop < 0 else stop]
        pos = cut
    return out


def with_header(sender: str, seq: int, dropped: int, body: bytes) -> bytes:
    """One datagram: the header line, then a body from :func:`pack`."""
    return f"{MAGIC} {sender} {seq} {dropped}".encode("utf-8", "replace") + body


#: Longest decimal field accepted: every u64 fits in 20 digits.
_MAX_DIGITS = 20
#: Longest sender id accepted (the batch budget reserves :data:`_MAX_HEADER` for the header).
MAX_SENDER = 48
#: The largest UDP payload over IPv4.
MAX_UDP_PAYLOAD = 65507
#: Longest acknowledgement accepted.
MAX_ACK = _MAX_HEADER + MAX_SENDER


def _number(text: str) -> int:
    # str.isdigit() accepts "²" and other non-ASCII digits that int() rejects or misreads;
    # the wire format is ASCII decimal only.
    if not text or len(text) > _MAX_DIGITS or not text.isascii() or not text.isdigit():
        raise MalformedDatagram("bad header fields")
    return int(text)


def split(data: bytes | bytearray | memoryview) -> tuple[str, int, int, str]:
    """``(sender, seq, dropped, body)`` of one datagram, the body left as one string.

    The monitor's fast path: it scans the body with one regular expression instead of
    materialising a tuple of lines. Raises :class:`MalformedDatagram`.
    """
    if len(data) > MAX_UDP_PAYLOAD:
        raise MalformedDatagram("datagram too large")
    try:
        text = str(data, "utf-8")  # works on a memoryview of the receive buffer: no copy
    except UnicodeDecodeError as exc:
        raise MalformedDatagram(f"not UTF-8 at byte {exc.start}") from None
    header, _, body = text.partition("\n")
    if len(header) > _MAX_HEADER + MAX_SENDER:
        raise MalformedDatagram("bad header")
    parts = header.split(" ")
    if len(parts) != 4 or parts[0] != MAGIC:
        raise MalformedDatagram("bad header")
    _, sender, seq_text, dropped_text = parts
    if not sender or len(sender) > MAX_SENDER or not sender.isprintable():
        raise MalformedDatagram("bad header fields")
    return sender, _number(seq_text), _number(dropped_text), body


def decode(data: bytes) -> Datagram:
    """Parse one datagram; raise :class:`MalformedDatagram` for anything else."""
    sender, seq, dropped, body = split(data)
    lines = tuple(body.split("\n")) if body else ()
    return Datagram(sender, seq, dropped, lines)


def encode_ack(sender: str, next_seq: int, window: int) -> bytes:
    """The monitor's acknowledgement to ``sender``: datagrams below ``next_seq`` were taken
    off its socket; ``window`` bytes may be in flight (sent, not yet acknowledged)."""
    return f"{ACK_MAGIC} {sender} {next_seq} {window}".encode("utf-8", "replace")


def decode_ack(data: bytes | bytearray | memoryview) -> tuple[str, int, int]:
    """``(sender, next_seq, window)`` of an acknowledgement; raises :class:`MalformedDatagram`.

    Checked like a datagram header: acknowledgements come from the network too.
    """
    if len(data) > MAX_ACK:
        raise MalformedDatagram("acknowledgement too long")
    try:
        text = str(data, "ascii")
    except UnicodeDecodeError:
        raise MalformedDatagram("acknowledgement not ASCII") from None
    parts = text.split(" ")
    if len(parts) != 4 or parts[0] != ACK_MAGIC or not parts[1] or not parts[1].isprintable():
        raise MalformedDatagram("bad acknowledgement")
    return parts[1], _number(parts[2]), _number(parts[3])
