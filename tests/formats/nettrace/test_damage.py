"""Damaged and truncated streams: only FormatError (file + offset), nothing else.

Every truncation point of the small real fixture; random byte flips of both fixtures;
size fields made huge (refused before anything is allocated or waited for).
"""

from __future__ import annotations

import contextlib
import random
import struct

import pytest

from profkit.errors import FormatError
from profkit.formats.nettrace import Event, NettraceParser, Truncation, read_nettrace

from .conftest import SAMPLES_TRACE


def _read_or_error(data: bytes, name: str = "x.nettrace") -> FormatError | None:
    try:
        read_nettrace(data, name)
    except FormatError as exc:
        return exc
    return None


def test_every_truncation_point_is_one_error(samples_bytes: bytes) -> None:
    whole = read_nettrace(samples_bytes, "whole")
    keys = [(e.timestamp, e.stack_id, e.thread_id) for e in whole.events]
    for cut in range(len(samples_bytes)):
        error = _read_or_error(samples_bytes[:cut], "cut.nettrace")
        assert error is not None, cut
        assert error.kind in ("truncated", "bad_magic"), (cut, error)
        message = str(error)
        assert message.startswith("cut.nettrace: offset 0x") and "\n" not in message
        assert error.offset is not None and error.offset <= cut
        if cut >= 102:  # past the Trace object: what came before the cut is kept
            kept = read_nettrace(samples_bytes[:cut], "cut", keep_truncated=True)
            assert kept.truncation is not None
            assert [(e.timestamp, e.stack_id, e.thread_id) for e in kept.events] == keys[
                : len(kept.events)
            ]


def test_incremental_cut_reports_truncation_after_events(samples_bytes: bytes) -> None:
    cut = len(samples_bytes) - 40  # inside the last block
    parser = NettraceParser("live")
    records = parser.feed(samples_bytes[:cut])
    truncation = parser.finish()
    assert isinstance(truncation, Truncation)
    assert truncation.error.kind == "truncated"
    assert "live" in str(truncation.error)
    assert any(isinstance(r, Event) for r in records)
    assert parser.truncation is truncation


def test_random_byte_flips_only_format_errors(samples_bytes: bytes, runtime_bytes: bytes) -> None:
    rng = random.Random(20261202)
    for data, rounds in ((samples_bytes, 1500), (runtime_bytes, 40)):
        for _ in range(rounds):
            mutated = bytearray(data)
            for _ in range(rng.randint(1, 4)):
                mutated[rng.randrange(len(mutated))] = rng.randrange(256)
            error = _read_or_error(bytes(mutated))
            if error is not None:
                assert error.path == "x.nettrace" and error.offset is not None


def test_random_garbage_after_header(samples_bytes: bytes) -> None:
    rng = random.Random(7)
    for _ in range(300):
        junk = bytes(rng.randrange(256) for _ in range(rng.randint(1, 200)))
        assert _read_or_error(samples_bytes[:32] + junk) is not None


def _first_block_size_offset(data: bytes) -> int:
    """The offset of the first block object's int32 size (after the Trace object)."""
    trace_end = 32 + 15 + 5 + 1 + 48 + 1  # header, type object, name 'Trace', payload, tag
    name_size = struct.unpack_from("<i", data, trace_end + 11)[0]
    return trace_end + 15 + name_size + 1


def test_huge_block_size_is_refused_not_awaited(samples_bytes: bytes) -> None:
    at = _first_block_size_offset(samples_bytes)
    mutated = bytearray(samples_bytes)
    struct.pack_into("<i", mutated, at, 0x7FFF_FFF0)
    error = _read_or_error(bytes(mutated))
    assert error is not None and error.kind == "too_large" and error.offset == at
    parser = NettraceParser("live")
    parser.feed(bytes(mutated[: at + 8]))  # the trace header comes out first
    with pytest.raises(FormatError, match="too large"):
        parser.finish()


@pytest.mark.parametrize("value", [-1, -0x7FFF_FFFF])
def test_negative_block_size(samples_bytes: bytes, value: int) -> None:
    at = _first_block_size_offset(samples_bytes)
    mutated = bytearray(samples_bytes)
    struct.pack_into("<i", mutated, at, value)
    error = _read_or_error(bytes(mutated))
    assert error is not None and error.kind == "malformed"


def test_not_nettrace() -> None:
    for data in (b"", b"Nettrac", b"PK\x03\x04" + bytes(60), b"Nettrace" + bytes(4)):
        error = _read_or_error(data)
        assert error is not None and error.kind in ("bad_magic", "truncated", "unsupported_version")


def test_bytes_after_the_end(samples_bytes: bytes) -> None:
    error = _read_or_error(samples_bytes + b"\x00")
    assert error is not None and error.offset == len(samples_bytes)
    parser = NettraceParser("live")
    parser.feed(samples_bytes)
    with pytest.raises(FormatError, match="after the end"):
        parser.feed(b"x")
    parser = NettraceParser("live")  # in the same chunk as the end
    assert parser.feed(samples_bytes + b"x")
    with pytest.raises(FormatError, match="after the end"):
        parser.finish()


def test_damage_after_events_raises_on_the_next_call(samples_bytes: bytes) -> None:
    whole = read_nettrace(samples_bytes, "whole")
    mutated = bytearray(samples_bytes)
    mutated[len(samples_bytes) - 1] = 0x77  # the end tag
    parser = NettraceParser("live")
    records = parser.feed(bytes(mutated))
    assert sum(isinstance(r, Event) for r in records) == len(whole.events)
    with pytest.raises(FormatError):
        parser.finish()


def test_name_in_the_fixture_path() -> None:
    assert SAMPLES_TRACE.exists()


def _v4_metadata_stream(payload: bytes) -> bytes:
    """A V4 stream with one metadata row of ``payload`` (via the test writer's framing)."""
    from .nettrace_writer import NettraceWriter, RawEvent

    writer = NettraceWriter(4, 8, compressed=False)
    writer.trace()
    writer._block(3, b"MetadataBlock", writer._rows([RawEvent(0, 0, 0, 0, 0, 0, 0, payload)]))
    return writer.finish()


def _v4_head() -> bytes:
    text = "P".encode("utf-16-le") + b"\x00\x00"
    return struct.pack("<i", 1) + text + struct.pack("<i", 1) + text + struct.pack("<qii", 0, 0, 0)


def test_deeply_nested_field_types_are_refused_not_recursed() -> None:
    chain = struct.pack("<i", 19) * 5000 + struct.pack("<i", 9)  # array of array of ... int
    field = "f".encode("utf-16-le") + b"\x00\x00" + chain
    params = struct.pack("<i", 1) + struct.pack("<i", len(field) + 4) + field
    payload = _v4_head() + struct.pack("<i", 0) + struct.pack("<iB", len(params), 2) + params
    error = _read_or_error(_v4_metadata_stream(payload))
    assert error is not None and error.kind == "malformed" and "nested" in error.detail
    objects = struct.pack("<ii", 1, 1) * 5000  # object of object of ...
    error = _read_or_error(_v4_metadata_stream(_v4_head() + objects))
    assert error is not None and "nested" in error.detail


def test_huge_counts_are_refused_before_allocating() -> None:
    payload = _v4_head() + struct.pack("<i", 0x7FFF_FFFF)  # fields
    error = _read_or_error(_v4_metadata_stream(payload))
    assert error is not None and error.kind == "too_large"
    from .nettrace_writer import NettraceWriter

    for version in (4, 6):
        writer = NettraceWriter(version)
        writer.trace()
        writer._block(5, b"StackBlock", struct.pack("<II", 1, 0xFFFF_FFFF))
        error = _read_or_error(writer.finish())
        assert error is not None and error.kind == "too_large", version
        writer = NettraceWriter(version)
        writer.trace()
        body = (
            struct.pack("<qI", 0, 0xFFFF_FFFF) if version == 4 else struct.pack("<QII", 0, 0, 2**31)
        )
        writer._block(4, b"SPBlock", body)
        error = _read_or_error(writer.finish())
        assert error is not None and error.kind == "too_large", version


def test_varint_runs_are_bounded() -> None:
    from .nettrace_writer import NettraceWriter

    writer = NettraceWriter(6)
    writer.trace()
    writer._block(7, b"", b"\xff" * 64)  # a remove-thread block of one endless varint
    error = _read_or_error(writer.finish())
    assert error is not None and "varint" in error.detail


def test_size_fields_do_not_drive_allocation(samples_bytes: bytes) -> None:
    """Huge declared sizes cost nothing: the peak stays near the input's own size."""
    import tracemalloc

    from .nettrace_writer import NettraceWriter

    at = _first_block_size_offset(samples_bytes)
    huge_block = bytearray(samples_bytes)
    struct.pack_into("<i", huge_block, at, 60 << 20)  # under the cap: waited for, not allocated
    writer = NettraceWriter(6)
    writer.trace()
    writer._block(5, b"StackBlock", struct.pack("<IIQ", 1, 1, 0xFFFF_FFFF))  # one 4 GB stack
    inputs = [bytes(huge_block), writer.finish()]
    tracemalloc.start()
    try:
        for data in inputs:
            assert _read_or_error(data) is not None
            parser = NettraceParser("live")
            parser.feed(data)
            with contextlib.suppress(FormatError):
                parser.finish()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20, peak


def test_unreadable_paths_are_one_error(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from profkit.errors import ProfkitError
    from profkit.formats.nettrace import load_nettrace

    for path in (tmp_path / "missing.nettrace", tmp_path):
        with pytest.raises(ProfkitError) as caught:
            load_nettrace(str(path))
        assert "\n" not in str(caught.value)
