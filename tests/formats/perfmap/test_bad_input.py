"""Bad input: every reader fails with one PerfMapFormatError naming file and line."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from profkit.errors import PerfMapFormatError
from profkit.formats.perfmap.perfinfo import read_perfinfo
from profkit.formats.perfmap.perfpid import read_perf_map
from profkit.formats.perfmap.r2rmap import read_r2rmap

GOOD_PERF = b"7f0000001000 40 first\n7f0000001040 20 second\n"
GOOD_R2R = b"FFFFFFFF 00 734D59D6DE0E96AA3C77B3E2ED498097\nFFFFFFFE 00 1\n000115D0 0D A::B()\n"

PERF_CASES = [
    (b"7f0000001080\n", "truncated", "before the size"),
    (b"7f0000001080 10\n", "truncated", "before the name"),
    (b"7f0000001080 10 \n", "truncated", "before the name"),
    (b"\n", "truncated", "empty line"),
    (b"zz0000001080 10 name\n", "malformed", "is not a hex number"),
    (b"7f0000001080 1g name\n", "malformed", "is not a hex number"),
    (b"-7f0000001080 10 name\n", "malformed", "is not a hex number"),
    (b"7f00\xff0001080 10 name\n", "malformed", "is not a hex number"),
    (b"1" + b"0" * 16 + b" 10 name\n", "too_large", "does not fit in 64 bits"),
    (b"7f0000001080 " + b"f" * 40 + b" name\n", "too_large", "does not fit in 64 bits"),
    (b"7f0000001080 " + b"f" * 5000 + b" name\n", "too_large", "does not fit in 64 bits"),
]

R2R_CASES = [
    (b"000115E0\n", "truncated", "before the size"),
    (b"000115E0 3F\n", "truncated", "before the name"),
    (b"000115E0 3F N\xff\xfe\n", "malformed", "not valid UTF-8"),
    (b"0001G5E0 3F N\n", "malformed", "is not a hex number"),
    (b"100000000 3F N\n", "too_large", "does not fit in 32 bits"),
    (b"000115E0 100000000 N\n", "too_large", "does not fit in 32 bits"),
]


@pytest.mark.parametrize(("line", "kind", "words"), PERF_CASES)
def test_perf_map_bad_line(line: bytes, kind: str, words: str) -> None:
    with pytest.raises(PerfMapFormatError) as info:
        read_perf_map(GOOD_PERF + line + b"7f0000002000 10 after\n", path="perf-9.map")
    err = info.value
    assert (err.kind, err.line) == (kind, 3)
    assert words in str(err)
    assert str(err).startswith("perf-9.map: line 3: ")
    assert "\n" not in str(err) and len(str(err)) < 200
    lenient = read_perf_map(GOOD_PERF + line + b"7f0000002000 10 after\n", strict=False)
    assert lenient.names == ["first", "second", "after"]
    assert [n for n, _ in lenient.skipped] == [3]


@pytest.mark.parametrize(("line", "kind", "words"), R2R_CASES)
def test_r2rmap_bad_line(line: bytes, kind: str, words: str) -> None:
    with pytest.raises(PerfMapFormatError) as info:
        read_r2rmap(GOOD_R2R + line, path="x.ni.r2rmap")
    err = info.value
    assert (err.kind, err.line) == (kind, 4)
    assert words in str(err) and str(err).startswith("x.ni.r2rmap: line 4: ")


def test_non_utf8_names_are_fine_in_perf_maps() -> None:
    assert read_perf_map(b"7f00 10 \xff\xfe\n").names[0] == "\udcff\udcfe"


def _check_prefixes(reader, data: bytes, offsets) -> None:  # type: ignore[no-untyped-def]
    for cut in offsets:
        try:
            reader(data[:cut], path="cut")
        except PerfMapFormatError as err:
            assert err.line is not None and err.path == "cut"


def test_every_truncation_of_the_r2rmap_sample(r2rmap_bytes: bytes) -> None:
    _check_prefixes(read_r2rmap, r2rmap_bytes, range(len(r2rmap_bytes) + 1))


def test_sampled_truncations_of_the_dotnet_map(dotnet_map_bytes: bytes) -> None:
    rng = random.Random(3)
    offsets = rng.sample(range(len(dotnet_map_bytes) + 1), 300)
    _check_prefixes(read_perf_map, dotnet_map_bytes, offsets)


@pytest.mark.parametrize("reader", [read_r2rmap, read_perf_map, read_perfinfo])
def test_mutations_never_escape(reader, r2rmap_bytes: bytes) -> None:  # type: ignore[no-untyped-def]
    rng = random.Random(11)
    data = bytearray(r2rmap_bytes[:1500])
    for _ in range(300):
        mutated = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            mutated[rng.randrange(len(mutated))] = rng.randrange(256)
        try:
            reader(bytes(mutated), path="m")
        except PerfMapFormatError as err:
            assert err.line is not None


def test_bad_token_is_shown_as_its_bytes() -> None:
    """Raw bytes were shown as ``\\\\xb8`` (a doubled backslash) next to valid UTF-8
    controls shown as ``\\x94``; now every non-printable byte is one ``\\xNN``."""
    with pytest.raises(PerfMapFormatError) as info:
        read_perf_map(b"\xc2\x94x\xb8\x1b 10 name\n", path="q.map")
    assert "address '\\xc2\\x94x\\xb8\\x1b' is not a hex number" in str(info.value)
    assert "\\\\" not in str(info.value) and "\x1b" not in str(info.value)


def test_inputs_are_read_with_a_size_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``perfmap show /dev/zero`` read until the OOM killer came (24 GB)."""
    import os
    import threading

    from profkit.formats.perfmap import _io

    monkeypatch.setattr(_io, "MAX_INPUT_BYTES", 100)
    big = tmp_path / "perf-1.map"
    big.write_bytes(b"1000 10 name\n" * 10)
    with pytest.raises(PerfMapFormatError, match="too large"):
        _io.read_input(str(big), PerfMapFormatError)  # a regular file: refused by its size
    fifo = tmp_path / "stream"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_bytes(b"x" * 1000), daemon=True)
    writer.start()
    with pytest.raises(PerfMapFormatError, match="too large"):
        _io.read_input(str(fifo), PerfMapFormatError)  # a stream: read only up to the cap
    writer.join(10)


def test_long_lines_come_in_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    from profkit.formats.perfmap import _io, perfscript
    from profkit.formats.perfmap.perfscript import SymbolizeStats, symbolize_stream
    from profkit.formats.perfmap.symbolizer import Symbolizer

    monkeypatch.setattr(_io, "MAX_LINE_BYTES", 4)
    assert list(_io.iter_lines(io.BytesIO(b"abcdefghij\nk\n"))) == [
        b"abcd",
        b"efgh",
        b"ij\n",
        b"k\n",
    ]
    monkeypatch.setattr(perfscript, "BLOCK_BYTES", 8)  # blocks bounded by bytes, not only lines
    blocks = list(symbolize_stream([b"abcd"] * 6, Symbolizer(), SymbolizeStats()))
    assert blocks == [b"abcdabcd"] * 3
