"""Native-format integers, NativeArray and NativeHashtable: round trips and hostile input.

No hypothesis deadlines: on the shared 2-CPU CI machine one example can take 300 ms.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from profkit.errors import FormatError
from profkit.formats.r2r.metadata import read_compressed
from profkit.formats.r2r.nativeformat import (
    NativeReader,
    native_array,
    native_array_get,
    native_hashtable,
)

from ._encode import (
    enc_compressed,
    enc_hashtable,
    enc_native_array,
    enc_signed,
    enc_unsigned,
)


def _reader(data: bytes) -> NativeReader:
    return NativeReader(data, 0, len(data), "x.dll")


@settings(deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_unsigned_round_trip(v: int) -> None:
    data = enc_unsigned(v) + b"\xff"
    assert _reader(data).unsigned(0) == (v, len(data) - 1)


@settings(deadline=None)
@given(st.integers(-(2**31), 2**31 - 1))
def test_signed_round_trip(v: int) -> None:
    data = enc_signed(v)
    assert _reader(data).signed(0) == (v, len(data))


@settings(deadline=None)
@given(st.integers(0, 2**29 - 1))
def test_compressed_round_trip(v: int) -> None:
    data = enc_compressed(v)
    assert read_compressed(data, 0, len(data), None) == (v, len(data))


@settings(max_examples=200, deadline=None)
@given(
    st.integers(0, 300).flatmap(
        lambda n: st.tuples(
            st.just(n),
            st.dictionaries(st.integers(0, max(n - 1, 0)), st.integers(0, 2**32 - 1), max_size=n),
            st.sampled_from([1, 2, 4]),
        )
    )
)
def test_native_array_round_trip(case: tuple[int, dict[int, int], int]) -> None:
    count, values, entry = case
    elements = {i: enc_unsigned(v) for i, v in values.items()}
    try:
        data = enc_native_array(count, elements, entry)
    except struct.error:  # small block offsets cannot reach far blocks
        data = enc_native_array(count, elements, 4)
    r = _reader(data)
    got = {i: r.unsigned(off)[0] for i, off in native_array(r, 0)}
    assert got == values
    for i in range(count):
        off = native_array_get(r, 0, i)
        assert (off is None) == (i not in values)
        if off is not None:
            assert r.unsigned(off)[0] == values[i]


@settings(max_examples=200, deadline=None)
@given(
    st.integers(0, 5).flatmap(
        lambda shift: st.lists(
            st.lists(st.tuples(st.integers(0, 255), st.binary(min_size=1, max_size=6)), max_size=5),
            min_size=1 << shift,
            max_size=1 << shift,
        )
    ),
    st.sampled_from([1, 2, 4]),
)
def test_native_hashtable_round_trip(buckets: list[list[tuple[int, bytes]]], entry: int) -> None:
    try:
        data = enc_hashtable(buckets, entry)
    except struct.error:  # one-byte bucket offsets cannot describe it
        data = enc_hashtable(buckets, 4)
    r = _reader(data)
    got = [(low, data[off : off + 1]) for low, off in native_hashtable(r, 0)]
    want = [(low, d[:1]) for bucket in buckets for low, d in bucket]
    assert got == want


def test_hashtable_with_descending_bucket_bounds_is_refused() -> None:
    """A 'cyclic' table (bucket 1 starts before bucket 0 ends) must not revisit bytes."""
    data = bytearray(enc_hashtable([[(1, b"a"), (2, b"b")], [(3, b"c")]], 2))
    # bucket offsets: [start0, start1, end]; make start1 < start0's end by pointing back
    data[3:5] = (3).to_bytes(2, "little")
    with pytest.raises(FormatError, match="bucket bounds must ascend"):
        list(native_hashtable(_reader(bytes(data)), 0))


def test_hashtable_huge_bucket_count_is_refused() -> None:
    data = bytes([31 << 2 | 2]) + b"\0" * 64
    with pytest.raises(FormatError) as err:
        list(native_hashtable(_reader(data), 0))
    assert err.value.kind == "too_large"


def test_native_array_huge_count_is_refused() -> None:
    data = enc_unsigned((1 << 29) << 2 | 2) + b"\0" * 16
    with pytest.raises(FormatError) as err:
        list(native_array(_reader(data), 0))
    assert err.value.kind == "too_large" and err.value.offset == 0


def test_native_array_backward_child_is_refused() -> None:
    # one block; root says "right child at +0" (points at itself: a cycle)
    data = enc_unsigned(1 << 2 | 0) + b"\x01" + enc_unsigned(0 << 2 | 2)
    with pytest.raises(FormatError, match="backwards"):
        list(native_array(_reader(data), 0))


@pytest.mark.parametrize("lead", [0x1F, 0x3F, 0xFF])
def test_invalid_integer_lead_byte(lead: int) -> None:
    with pytest.raises(FormatError, match="invalid leading byte"):
        _reader(bytes([lead, 0, 0, 0, 0, 0])).unsigned(0)


def test_truncated_integers_name_the_offset() -> None:
    for v in (1 << 7, 1 << 14, 1 << 21, 1 << 28):
        enc = enc_unsigned(v)
        for cut in range(len(enc)):
            with pytest.raises(FormatError) as err:
                NativeReader(enc, 0, cut, "x").unsigned(0)
            assert err.value.offset == 0
