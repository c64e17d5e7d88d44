"""The UDP wire format between a profiler's live stream and ``profkit monitor``.

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
* Datagrams stay at or under :data:`MAX_DATAGRAM` bytes so they are never fragmented on
  an Ethernet-sized MTU; a single over-long line is cut to fit.
"""

from __future__ import annotations

from dataclasses import dataclass

MAGIC = "PK1"
#: 1500-byte Ethernet MTU − 20 (IPv4) − 8 (UDP) − slack for IP options/tunnels.
MAX_DATAGRAM = 1400
_MAX_HEADER = 64


@dataclass(frozen=True, slots=True)
class Datagram:
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


def batch(lines: list[str], header_len: int = _MAX_HEADER) -> list[list[str]]:
    """Split ``lines`` into batches whose encoded datagram fits :data:`MAX_DATAGRAM`."""
    budget = MAX_DATAGRAM - header_len
    batches: list[list[str]] = []
    current: list[str] = []
    size = 0
    for line in lines:
        raw = len(line.encode("utf-8", "replace")) + 1
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


def decode(data: bytes) -> Datagram:
    """Parse one datagram; raise :class:`MalformedDatagram` for anything else."""
    if len(data) > 65507:
        raise MalformedDatagram("datagram too large")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MalformedDatagram(f"not UTF-8 at byte {exc.start}") from None
    header, _, body = text.partition("\n")
    parts = header.split(" ")
    if len(parts) != 4 or parts[0] != MAGIC:
        raise MalformedDatagram("bad header")
    _, sender, seq_text, dropped_text = parts
    if not sender or not seq_text.isdigit() or not dropped_text.isdigit():
        raise MalformedDatagram("bad header fields")
    lines = tuple(body.split("\n")) if body else ()
    return Datagram(sender, int(seq_text), int(dropped_text), lines)
