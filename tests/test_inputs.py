"""profkit._inputs: what may be opened, how much is read, how gzip is capped."""

from __future__ import annotations

import gzip
import os
import sys
import threading
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from profkit import _inputs
from profkit._inputs import InputError, gunzip, open_input, read_input
from profkit.errors import FormatError


@pytest.fixture(autouse=True)
def _short_fifo_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    """A FIFO nobody writes to is watched for a writer for 2 s; tests need not wait."""
    from profkit import _inputs as inputs_module

    monkeypatch.setattr(inputs_module, "FIFO_GRACE_S", 0.2)


def test_regular_file_prefix_then_rest(tmp_path: Path) -> None:
    p = tmp_path / "f"
    p.write_bytes(b"abc" * 100_000)
    with open_input(str(p)) as inp:
        assert inp.size == 300_000
        assert inp.prefix(5) == b"abcab"
        assert inp.prefix(5) == b"abcab"  # not consumed
        assert inp.read_all(1 << 20) == b"abc" * 100_000


def test_size_checked_before_reading(tmp_path: Path) -> None:
    p = tmp_path / "big"
    with open(p, "wb") as fh:
        fh.truncate(10_000)
    with pytest.raises(FormatError, match="larger than the 100 accepted"):
        read_input(str(p), 100)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda d: d, "is a directory"),
        (lambda d: d / "missing", "no such file"),
        (lambda d: (d / "link").symlink_to(d / "gone") or d / "link", "symbolic link"),
        (lambda d: Path("/dev/zero"), "is a character device"),
    ],
)
def test_refused_with_a_clear_message(tmp_path: Path, make: object, message: str) -> None:
    path = make(tmp_path)  # type: ignore[operator]
    with pytest.raises(InputError, match=message):
        open_input(str(path))


def test_fifo_without_writer_is_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="FIFO with no writer"):
        open_input(str(fifo))


def test_fifo_with_a_writer_is_read(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    wfd = os.open(fifo, os.O_RDWR)  # holds a writer end without blocking
    try:

        def feed() -> None:
            os.write(wfd, b"hello")

        t = threading.Timer(0.05, feed)
        t.start()
        with open_input(str(fifo)) as inp:
            assert inp.size is None
            assert inp.read(5) == b"hello"
        t.join()
    finally:
        os.close(wfd)


def test_stdin_from_a_device_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    with open("/dev/zero", "rb") as zero:
        monkeypatch.setattr(sys, "stdin", _Wrap(zero))
        with pytest.raises(InputError, match="stdin: is a character device"):
            open_input("-")


class _Wrap:
    def __init__(self, fh: object) -> None:
        self.buffer = fh


def test_gzip_bomb_stops_early() -> None:
    bomb = gzip.compress(b"{" + b" " * (40 << 20), compresslevel=9)
    assert len(bomb) < 400_000
    read = 0
    with pytest.raises(FormatError, match="decompression bomb"):
        for piece in gunzip(iter([bomb]), limit=1 << 30, name="b"):
            read += len(piece)
    assert read < 32 << 20


def test_gzip_limit_and_truncation() -> None:
    data = gzip.compress(b"x" * 5000)
    with pytest.raises(FormatError, match="more than 100 bytes"):
        list(gunzip(iter([data]), limit=100, name="g"))
    with pytest.raises(FormatError, match="truncated"):
        list(gunzip(iter([data[:-5]]), limit=1 << 20, name="g"))


@given(
    st.lists(st.binary(max_size=300), min_size=1, max_size=4),
    st.integers(1, 50),
    st.binary(max_size=3),
)
def test_gzip_members_split_anywhere(members: list[bytes], step: int, garbage: bytes) -> None:
    blob = b"".join(gzip.compress(m) for m in members)
    blob_with = blob + garbage if garbage[:2] != b"\x1f\x8b" else blob
    chunks = [blob_with[i : i + step] for i in range(0, len(blob_with), step)]
    out = b"".join(gunzip(iter(chunks), limit=1 << 20, name="g"))
    assert out == b"".join(members)


def test_read_all_counts_what_was_peeked(tmp_path: Path) -> None:
    p = tmp_path / "f"
    p.write_bytes(b"x" * 200)
    with open_input(str(p)) as inp:
        inp.size = None  # as for a pipe: only reading tells
        inp.prefix(150)
        with pytest.raises(FormatError, match="larger than 100"):
            inp.read_all(100)
    assert _inputs.PREFIX_BYTES >= 4096
