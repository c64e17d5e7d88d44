"""`profkit profdata show|merge|overlap` on inputs that are not profiles (issue #17).

Each case was found by an audit: ``/dev/zero`` took ~5.9 GB then exit 70,
``/dev/urandom`` hung, a 4 GB file was read whole to say "bad magic", a FIFO without a
writer hung; ``overlap`` of a missing file, a directory, a dangling symlink or ``-``
exited 70; a text count over 4,300 digits and weights of 2^64 and more exited 70.
Every one must now be one error line and exit status 2, quickly.
"""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path

import pytest

import profkit._inputs as inputs
from profkit.cli.main import main
from profkit.errors import ProfileFormatError
from profkit.formats.instrprof.reader import MAX_PROFILE_BYTES, read_profile
from tests.cli.test_profdata_merge import run

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "instrprof"
RAW = FIX / "clang22" / "ir.profraw"


def _commands(path: str, tmp_path: Path) -> list[list[str]]:
    good = str(FIX / "clang22" / "ir.proftext")
    return [
        ["profdata", "show", path],
        ["profdata", "merge", "-o", str(tmp_path / "out.profdata"), path],
        ["profdata", "overlap", good, path],
        ["profdata", "overlap", path, good],
    ]


def _one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.startswith("profkit: error:")]
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_devices_are_refused(device: str, tmp_path: Path) -> None:
    if not os.path.exists(device):
        pytest.skip(f"{device} does not exist here")
    for args in _commands(device, tmp_path):
        rc, _, err = run(args)
        assert rc == 2, (args, err)
        assert device in _one_error_line(err)
        assert "character device" in err
    assert not (tmp_path / "out.profdata").exists()


def test_fifo_without_writer_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inputs, "FIFO_GRACE_S", 0.05)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for args in _commands(str(fifo), tmp_path):
        rc, _, err = run(args)
        assert rc == 2, (args, err)
        assert str(fifo) in _one_error_line(err)
        assert "FIFO with no writer" in err  # (merge: in the warning naming the input)


@pytest.mark.parametrize("case", ["missing", "directory", "dangling"])
def test_overlap_of_what_is_not_a_file(case: str, tmp_path: Path) -> None:
    target = tmp_path / case
    if case == "directory":
        target.mkdir()
    elif case == "dangling":
        target.symlink_to(tmp_path / "nowhere")
    for args in _commands(str(target), tmp_path):
        if args[1] == "merge" and case == "directory":
            continue  # merge walks directories, as llvm-profdata does (an empty one: no inputs)
        rc, _, err = run(args)
        assert rc == 2, (args, err)
        assert str(target) in _one_error_line(err)


def test_overlap_of_stdin_garbage(monkeypatch: pytest.MonkeyPatch) -> None:
    """``-`` is stdin (as in llvm-profdata); garbage there is a format error, exit 2."""
    fake = io.TextIOWrapper(io.BytesIO(b"\x00\x01garbage" * 100))
    monkeypatch.setattr(sys, "stdin", fake)
    rc, _, err = run(["profdata", "overlap", str(RAW), "-"])
    assert rc == 2
    assert "stdin" in _one_error_line(err) and "bad magic" in err


def test_big_file_that_is_not_a_profile_is_judged_by_its_prefix(tmp_path: Path) -> None:
    """A 4 GB sparse file (no disk blocks): read whole before, now 8 bytes are enough."""
    big = tmp_path / "big.bin"
    with open(big, "wb") as fh:
        fh.truncate(4 << 30)
    rc, _, err = run(["profdata", "show", str(big)])
    assert rc == 2 and "bad magic" in _one_error_line(err)


def test_profile_over_the_size_cap_is_refused_before_reading(tmp_path: Path) -> None:
    big = tmp_path / "big.profraw"
    with open(big, "wb") as fh:
        fh.write(RAW.read_bytes()[:64])
        fh.truncate(MAX_PROFILE_BYTES + 1)
    with pytest.raises(ProfileFormatError, match=r"larger than"):
        read_profile(big)
    rc, _, err = run(["profdata", "show", str(big)])
    assert rc == 2 and str(big) in _one_error_line(err)


_TEXT = """:ir
main
# Func Hash:
1234
# Num Counters:
2
# Counter Values:
{count}
1
"""


@pytest.mark.parametrize(
    ("count", "ok"),
    [
        ("9" * 4301, False),  # int() refuses this many digits: was a ValueError, exit 70
        ("1" * 21, False),  # over 2^64
        ("0" * 5000 + "7", True),  # leading zeros do not count (LLVM's getAsInteger)
        (str((1 << 64) - 1), True),
    ],
)
def test_text_counts_with_many_digits(count: str, ok: bool, tmp_path: Path) -> None:
    path = tmp_path / "long.proftext"
    path.write_text(_TEXT.format(count=count))
    if ok:
        profile = read_profile(path)
        assert profile.records[0].counts[0] == int(count.lstrip("0") or "0")
        return
    with pytest.raises(ProfileFormatError):
        read_profile(path)
    for args in _commands(str(path), tmp_path):
        rc, _, err = run(args)
        assert rc == 2, (args, err)
        assert str(path) in _one_error_line(err)


@pytest.mark.parametrize("weight", [str(1 << 64), str(10**30), "9" * 5000])
def test_weights_of_2_64_and_more_are_usage_errors(weight: str, tmp_path: Path) -> None:
    listing = tmp_path / "inputs.txt"
    listing.write_text(f"{weight},{RAW}\n")
    out = tmp_path / "o.profdata"
    for args in (
        ["profdata", "merge", "-o", str(out), f"--weighted-input={weight},{RAW}"],
        ["profdata", "merge", "-o", str(out), "--input-files", str(listing)],
    ):
        rc, _, err = run(args)
        assert rc == 2, err
        assert "weight must be below 2^64" in _one_error_line(err)
        assert len(err) < 400  # the 5,000 digits are not echoed back
    assert not out.exists()


def test_largest_weight_is_accepted(tmp_path: Path) -> None:
    out = tmp_path / "o.profdata"
    rc, _, err = run(
        ["profdata", "merge", "-o", str(out), f"--weighted-input={(1 << 64) - 1},{RAW}"]
    )
    assert rc == 0, err
    assert main(["profdata", "show", str(out)]) == 0
