"""Bad input: every reader fed truncated and mutated real fixtures must raise
ProfileFormatError with an offset — never another exception, a hang, or a huge allocation."""

from __future__ import annotations

import random
import struct
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from profkit.errors import ProfileFormatError
from profkit.formats.instrprof import parse_indexed, parse_profile, parse_raw
from tests.formats.instrprof.fixtures import entries, ids, path_of
from tests.formats.instrprof.rawbuild import RawFunc, build_raw

# One raw and one indexed file per toolchain, plus the variants with unusual sections.
_WANTED = {"ir", "fe", "m32_ir", "fe_mcdc", "vtable", "ir_temporal", "dso_concat", "ir_plus_cs",
           "fe_singlebyte", "ir_nocompress", "binary_ids"}  # fmt: skip
SAMPLES = [e for e in entries("profraw") + entries("profdata") if e.get("variant") in _WANTED]
FULL_SWEEP_LIMIT = 1200  # files up to this size are cut at every offset
SAMPLED_OFFSETS = 300


def _check(data: bytes) -> None:
    try:
        parse_profile(data, "f.prof")
    except ProfileFormatError as exc:
        assert exc.offset is not None or exc.line is not None, str(exc)
        assert str(exc).startswith("f.prof: ")


def _offsets(size: int, rng: random.Random) -> list[int]:
    if size <= FULL_SWEEP_LIMIT:
        return list(range(size))
    return sorted(rng.sample(range(size), SAMPLED_OFFSETS))


@pytest.mark.parametrize("entry", SAMPLES, ids=ids(SAMPLES))
def test_truncated_everywhere(entry: dict) -> None:
    data = path_of(entry).read_bytes()
    rng = random.Random(entry["path"])
    for cut in _offsets(len(data), rng):
        _check(data[:cut])


@pytest.mark.parametrize("entry", SAMPLES, ids=ids(SAMPLES))
def test_mutated_words(entry: dict) -> None:
    data = path_of(entry).read_bytes()
    rng = random.Random(entry["path"])
    nasty = [b"\xff" * 8, (1 << 62).to_bytes(8, "little"), (1 << 31).to_bytes(8, "little"),
             bytes(8), (7).to_bytes(8, "little")]  # fmt: skip
    for _ in range(150):
        buf = bytearray(data)
        at = rng.randrange(0, len(buf) - 8) & ~7
        if rng.random() < 0.5:
            buf[at : at + 8] = rng.choice(nasty)
        else:
            buf[at + rng.randrange(8)] ^= 1 << rng.randrange(8)
        _check(bytes(buf))


def test_size_fields_do_not_drive_allocation() -> None:
    """Huge counts in headers fail before anything proportional to them is allocated."""
    data = bytearray(build_raw([RawFunc("a", 1, [1, 2, 3])]))
    tracemalloc.start()
    try:
        for field_at in range(16, 128, 8):  # every size field of the v10 header
            for value in (1 << 40, (1 << 64) - 8):
                buf = bytearray(data)
                struct.pack_into("<Q", buf, field_at, value)
                _check(bytes(buf))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


def test_indexed_entry_count_is_checked() -> None:
    items = entries("profdata", (22,))
    if not items:
        pytest.skip("fixtures not present")
    data = bytearray(path_of(items[0]).read_bytes())
    hash_offset = struct.unpack_from("<Q", data, 32)[0]
    struct.pack_into("<Q", data, hash_offset + 8, 1 << 60)
    with pytest.raises(ProfileFormatError) as info:
        parse_indexed(bytes(data), "x.profdata")
    assert info.value.kind == "too_large"


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300), st.sampled_from([b"", b"\x81rforpl\xff", b"\xfflprofi\x81"]))
def test_random_bytes(tail: bytes, magic: bytes) -> None:
    _check(magic + tail)


@settings(max_examples=100, deadline=None)
@given(st.binary(min_size=8, max_size=200))
def test_random_raw_headers(tail: bytes) -> None:
    head = struct.pack("<QQ", 0xFF6C70726F667281, 10)
    try:
        parse_raw(head + tail, "r")
    except ProfileFormatError as exc:
        assert exc.offset is not None
