"""The wire format: round trips and the hardened header checks."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from profkit.wire import udp as protocol

_line = st.text(st.characters(blacklist_characters="\n", blacklist_categories=("Cs",)), max_size=60)
_sender = st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=40)


@settings(max_examples=80, deadline=None)
@given(_sender, st.integers(0, 2**64 - 1), st.integers(0, 2**64 - 1), st.lists(_line, max_size=40))
def test_batch_encode_decode_round_trip(
    sender: str, seq: int, dropped: int, lines: list[str]
) -> None:
    for chunk in protocol.batch(lines) or [[]]:
        data = protocol.encode(sender, seq, dropped, chunk)
        assert len(data) <= protocol.MAX_DATAGRAM + 64 + 40
        got = protocol.decode(data)
        assert (got.sender, got.seq, got.dropped) == (sender, seq, dropped)
        if chunk and chunk != [""]:
            assert list(got.lines) == chunk


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"PK1",
        b"PK1 a 1\n",
        b"PK2 a 1 2\n",
        b"PK1 a 1 2 3\n",
        b"PK1  1 2\n",
        "PK1 a ² 0\n".encode(),
        "PK1 a 1 ١\n".encode(),
        b"PK1 a -1 0\n",
        b"PK1 a +1 0\n",
        b"PK1 a 1 " + b"9" * 21 + b"\n",
        b"PK1 a\x01b 1 0\n",
        b"PK1 " + b"s" * 49 + b" 1 0\n",
        b"PK1 a 1 0\n\xff\xfe",
        b"x" * 70000,
        b"PK1 a 1\t 0\n",
    ],
)
def test_malformed_datagrams(data: bytes) -> None:
    with pytest.raises(protocol.MalformedDatagram):
        protocol.decode(data)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_never_raise_anything_else(data: bytes) -> None:
    with contextlib.suppress(protocol.MalformedDatagram):
        protocol.decode(data)


def test_split_accepts_a_memoryview() -> None:
    buf = bytearray(100)
    data = protocol.encode("h/1", 5, 2, ["Enter: a"])
    buf[: len(data)] = data
    assert protocol.split(memoryview(buf)[: len(data)]) == ("h/1", 5, 2, "Enter: a")


@settings(max_examples=150, deadline=None)
@given(st.lists(_line, max_size=80), st.integers(80, 400))
def test_pack_keeps_every_line_within_the_size(lines: list[str], max_datagram: int) -> None:
    """``pack`` (the sender's fast path) against ``batch``: the same lines, the same cuts
    of over-long lines, every body within the budget."""
    packed = protocol.pack(lines, max_datagram=max_datagram)
    budget = max_datagram - 64
    assert all(len(body) <= budget and body.startswith(b"\n") for body in packed)
    received = [line for body in packed for line in body.decode("utf-8").split("\n")[1:]]
    expected = [
        line for chunk in protocol.batch(lines, max_datagram=max_datagram) for line in chunk
    ]
    assert received == [line.encode("utf-8", "replace").decode("utf-8") for line in expected]


def test_pack_fills_datagrams_and_headers_decode() -> None:
    lines = [f"    Leave: f{i}, Duration: {i}.250 us" for i in range(2000)]
    packed = protocol.pack(lines, max_datagram=protocol.MAX_LOOPBACK_DATAGRAM)
    assert len(packed) == len(protocol.batch(lines, max_datagram=protocol.MAX_LOOPBACK_DATAGRAM))
    datagram = protocol.with_header("h/1", 7, 3, packed[0])
    decoded = protocol.decode(datagram)
    assert (decoded.sender, decoded.seq, decoded.dropped) == ("h/1", 7, 3)
    assert decoded.lines == tuple(lines[: packed[0].count(b"\n")])


@settings(max_examples=80, deadline=None)
@given(_sender, st.integers(0, 2**64 - 1), st.integers(0, 2**64 - 1))
def test_ack_round_trip(sender: str, next_seq: int, window: int) -> None:
    data = protocol.encode_ack(sender, next_seq, window)
    assert len(data) <= protocol.MAX_ACK
    assert protocol.decode_ack(data) == (sender, next_seq, window)
    assert protocol.decode_ack(memoryview(bytearray(data))) == (sender, next_seq, window)


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"PK1A",
        b"PK1A a 1",
        b"PK1 a 1 2",
        b"PK1A a 1 2 3",
        b"PK1A  1 2",
        b"PK1A a -1 2",
        b"PK1A a 1 " + b"9" * 21,
        b"PK1A a\x01 1 2",
        "PK1A a ² 2".encode(),
        b"PK1A a 1 2\n",
        b"PK1A " + b"s" * 200 + b" 1 2",
    ],
)
def test_malformed_acks(data: bytes) -> None:
    with pytest.raises(protocol.MalformedDatagram):
        protocol.decode_ack(data)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_random_ack_bytes_never_raise_anything_else(data: bytes) -> None:
    with contextlib.suppress(protocol.MalformedDatagram):
        protocol.decode_ack(data)


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 2**40), st.integers(0, 2**40), st.data())
def test_truncated_or_mutated_acks(next_seq: int, window: int, data: st.DataObject) -> None:
    raw = bytearray(protocol.encode_ack("host/42", next_seq, window))
    cut = data.draw(st.integers(0, len(raw)))
    pos = data.draw(st.integers(0, len(raw) - 1))
    raw[pos] = data.draw(st.integers(0, 255))
    for candidate in (bytes(raw), bytes(raw[:cut])):
        try:
            sender, seq, win = protocol.decode_ack(candidate)
        except protocol.MalformedDatagram:
            continue
        assert 0 <= seq < 10**20 and 0 <= win < 10**20 and " " not in sender
