"""The ``--stream`` file opened once and checked on its descriptor (``_streamfile.py``):
a symlink swapped in after the check is never followed."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from profkit import _streamfile as streamfile
from profkit.profilers.elt.sinks import TextSink

needs_nofollow = pytest.mark.skipif(not hasattr(os, "O_NOFOLLOW"), reason="no O_NOFOLLOW")


@pytest.fixture(autouse=True)
def _nothing_left_prepared() -> Iterator[None]:
    yield
    streamfile.discard()


def test_the_sink_writes_the_file_checked_at_start_up_not_a_symlink_swapped_in(
    tmp_path: Path,
) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    path = tmp_path / "events.txt"
    streamfile.prepare(str(path))  # the runner's check
    path.rename(tmp_path / "checked.txt")
    path.symlink_to(victim)  # swapped in before the profiler's sink opens
    sink = TextSink(str(path))
    sink.write_lines(["Enter: app.work"])
    sink.close()
    assert victim.read_text() == "precious"
    assert (tmp_path / "checked.txt").read_text() == "Enter: app.work\n"


def test_the_prepared_file_is_handed_over_once(tmp_path: Path) -> None:
    path = tmp_path / "events.txt"
    streamfile.prepare(str(path))
    first = streamfile.take(str(path))
    assert first is not None and streamfile.take(str(path)) is None
    first.close()


@needs_nofollow
def test_an_own_symlink_is_followed_and_its_file_truncated(tmp_path: Path) -> None:
    target = tmp_path / "real.txt"
    target.write_text("old lines\n")
    (tmp_path / "link.txt").symlink_to(target)
    with streamfile.open_stream(str(tmp_path / "link.txt")) as out:
        out.write("new\n")
    assert target.read_text() == "new\n"
    assert (tmp_path / "link.txt").is_symlink()


def test_a_missing_file_is_created_and_a_regular_one_truncated(tmp_path: Path) -> None:
    path = tmp_path / "events.txt"
    with streamfile.open_stream(str(path)) as out:
        out.write("a long first line\n")
    with streamfile.open_stream(str(path)) as out:
        out.write("b\n")
    assert path.read_text() == "b\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~_umask()


def test_a_device_is_opened_not_truncated() -> None:
    with streamfile.open_stream(os.devnull) as out:
        out.write("x\n")


@needs_nofollow
def test_a_link_that_changes_while_it_is_opened_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between the rule's check and the open, the link is pointed elsewhere: the opened
    file is not the one the path names once open, so nothing is written."""
    first, second = tmp_path / "first.txt", tmp_path / "second.txt"
    first.write_text("one")
    second.write_text("two")
    link = tmp_path / "events.txt"
    link.symlink_to(first)
    checks = []

    def check(path: str) -> None:
        checks.append(path)
        if len(checks) == 2:  # after the open: the link now names another file
            link.unlink()
            link.symlink_to(second)

    monkeypatch.setattr(streamfile, "refuse_planted_symlinks", check)
    with pytest.raises(PermissionError, match="changed while it was opened"):
        streamfile.open_stream(str(link))
    assert first.read_text() == "one" and second.read_text() == "two"


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
