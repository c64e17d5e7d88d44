"""Output files (``profkit._atomic``): atomic, never over an input or a device."""

from __future__ import annotations

import io
import os
import stat
import threading
from pathlib import Path

import pytest

from profkit._atomic import AtomicOutput, refuse_input_as_output, write_atomic, write_stdout
from profkit.errors import ProfkitError


def test_replaces_and_keeps_the_mode(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    target.write_bytes(b"old")
    target.chmod(0o640)
    write_atomic(target, b"new")
    assert target.read_bytes() == b"new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert os.listdir(tmp_path) == ["out.txt"]  # no temp file left


def test_failure_leaves_the_old_file(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    target.write_bytes(b"old")
    with pytest.raises(RuntimeError), AtomicOutput(target) as fh:
        fh.write(b"half")
        raise RuntimeError("crash while writing")
    assert target.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["out.txt"]


def test_symlink_keeps_the_link_and_replaces_its_target(tmp_path: Path) -> None:
    real = tmp_path / "real.txt"
    real.write_bytes(b"old")
    link = tmp_path / "link.txt"
    link.symlink_to(real.name)
    write_atomic(link, b"new")
    assert link.is_symlink() and real.read_bytes() == b"new"


def test_fifo_is_written_in_place(tmp_path: Path) -> None:
    """A rename over a FIFO or device would replace the node with a regular file
    (found by ``-o /dev/full`` as root, which turned the device into a file)."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    write_atomic(fifo, b"through the pipe")
    reader.join(10)
    assert got == [b"through the pipe"]
    assert stat.S_ISFIFO(fifo.stat().st_mode)


def test_device_is_not_replaced() -> None:
    if not os.path.exists("/dev/null") or not stat.S_ISCHR(os.stat("/dev/null").st_mode):
        pytest.skip("no /dev/null character device")
    write_atomic("/dev/null", b"x")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(IsADirectoryError):
        write_atomic(tmp_path, b"x")
    with pytest.raises(IsADirectoryError):  # a missing "out/" once became a file "out"
        write_atomic(f"{tmp_path}/out/", b"x")
    assert not (tmp_path / "out").exists()


def test_refuse_input_as_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("in.json").write_text("{}")
    os.link("in.json", "hard.json")
    assert refuse_input_as_output("./in.json", ["in.json"]) == "in.json"
    assert refuse_input_as_output("hard.json", ["other", "in.json"]) == "in.json"
    assert refuse_input_as_output("new.json", ["in.json"]) is None
    assert refuse_input_as_output("-", ["-"]) is None


class _Full(io.BytesIO):
    def write(self, data: object) -> int:
        raise OSError(28, "No space left on device")


def test_stdout_write_error_is_one_profkit_error(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = io.TextIOWrapper(_Full())
    monkeypatch.setattr("sys.stdout", fake)
    with pytest.raises(ProfkitError, match="cannot write to stdout: No space left on device"):
        write_stdout(b"data")


def test_stdout_without_a_binary_layer(monkeypatch: pytest.MonkeyPatch) -> None:
    """``main()`` called with ``sys.stdout`` redirected to a StringIO (contextlib.redirect_stdout)
    was an internal error: AttributeError 'buffer'."""
    text = io.StringIO()
    monkeypatch.setattr("sys.stdout", text)
    write_stdout("naïve\n".encode())
    assert text.getvalue() == "naïve\n"


needs_root = pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0,
    reason="planting another user's symlink needs root (lchown)",
)


def _shared_dir(tmp_path: Path) -> Path:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)  # like /tmp: sticky and world-writable
    return shared


@needs_root
@pytest.mark.parametrize("dangling", [False, True])
def test_a_symlink_planted_by_another_user_in_a_sticky_dir_is_not_followed(
    tmp_path: Path, dangling: bool
) -> None:
    shared = _shared_dir(tmp_path)
    victim = tmp_path / "victim.txt"
    if not dangling:
        victim.write_bytes(b"precious")
    link = shared / "out.json"
    link.symlink_to(victim)
    os.lchown(link, 4242, 4242)  # planted by someone else
    with pytest.raises(PermissionError, match="protected_symlinks"):
        write_atomic(link, b"x")
    assert victim.read_bytes() == b"precious" if not dangling else not victim.exists()
    # Our own link (or the directory owner's) is followed as before.
    os.lchown(link, os.geteuid(), os.getegid())
    write_atomic(link, b"mine")
    assert victim.read_bytes() == b"mine"


def test_own_symlink_in_a_sticky_dir_is_followed(tmp_path: Path) -> None:
    shared = _shared_dir(tmp_path)
    real = tmp_path / "real.txt"
    (shared / "link").symlink_to(real)
    write_atomic(shared / "link", b"ok")
    assert real.read_bytes() == b"ok"


def test_a_new_file_gets_the_umask_without_changing_it(tmp_path: Path) -> None:
    calls: list[int] = []
    real_umask = os.umask

    def spy(mask: int) -> int:
        calls.append(mask)
        return real_umask(mask)

    old = real_umask(0o027)
    try:
        os.umask = spy  # type: ignore[assignment]
        write_atomic(tmp_path / "new.txt", b"x")
    finally:
        os.umask = real_umask
        real_umask(old)
    assert calls == []  # the process umask was never touched (it raced other threads)
    assert stat.S_IMODE((tmp_path / "new.txt").stat().st_mode) == 0o640


def _dead_pid() -> int:
    import subprocess
    import sys

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_killed_writers_temp_file_is_removed_by_the_next_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """kill -9 between creating the temp file and the rename leaves the target's fixed temp
    name, unlocked; the next write of the same target removes it without listing the
    directory (that cost 120 ms a write among 100,000 files)."""
    from profkit._atomic import _temp_owner, write_atomic

    host = _temp_owner().rpartition("-")[0]
    orphan = tmp_path / f".out.json.{host}.tmp"
    orphan.write_bytes(b"half")
    other_target = tmp_path / f".other.json.{host}.tmp"
    other_target.write_bytes(b"half")

    def no_listing(*args: object) -> None:
        raise AssertionError("the directory was listed")

    monkeypatch.setattr(os, "scandir", no_listing)
    monkeypatch.setattr(os, "listdir", no_listing)
    write_atomic(tmp_path / "out.json", b"{}")
    write_atomic(tmp_path / "out.json", b"{1}")
    monkeypatch.undo()
    assert (tmp_path / "out.json").read_bytes() == b"{1}"
    assert sorted(os.listdir(tmp_path)) == [other_target.name, "out.json"]


def test_a_live_writers_temp_is_left_alone_and_dead_ones_of_that_target_removed(
    tmp_path: Path,
) -> None:
    """While another writer of the same target holds its fixed temp (locked), a second
    writer takes a name of its own, and removes the random-named temps of writers of this
    host that are gone (never a live writer's, never another host's or target's)."""
    from profkit._atomic import AtomicOutput, _temp_owner, write_atomic

    host = _temp_owner().rpartition("-")[0]
    orphan = tmp_path / f".out.json.{host}-{_dead_pid()}.0123456789ab.tmp"
    live = tmp_path / f".out.json.{host}-{os.getpid()}.0123456789ab.tmp"
    elsewhere = tmp_path / f".out.json.otherhost-{_dead_pid()}.0123456789ab.tmp"
    other_target = tmp_path / f".other.json.{host}-{_dead_pid()}.0123456789ab.tmp"
    for p in (orphan, live, elsewhere, other_target):
        p.write_bytes(b"half")
    first = AtomicOutput(tmp_path / "out.json")
    with first as fh:
        fh.write(b"first")
        write_atomic(tmp_path / "out.json", b"second")  # meanwhile
        assert (tmp_path / "out.json").read_bytes() == b"second"
        assert (tmp_path / f".out.json.{host}.tmp").exists()  # the first writer's, untouched
    assert (tmp_path / "out.json").read_bytes() == b"first"  # the last to finish wins
    assert not orphan.exists()
    assert live.exists() and elsewhere.exists() and other_target.exists()
    assert not [
        p
        for p in os.listdir(tmp_path)
        if p.startswith(".out.json.") and p not in {live.name, elsewhere.name}
    ]


def test_without_locks_on_the_filesystem_a_write_still_succeeds_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    from profkit import _atomic

    def no_locks(fd: int, operation: int) -> None:
        raise OSError(errno.ENOLCK, "no locks available")

    monkeypatch.setattr(_atomic, "_flock", no_locks)
    _atomic.write_atomic(tmp_path / "out.json", b"{}")
    assert os.listdir(tmp_path) == ["out.json"]
    assert (tmp_path / "out.json").read_bytes() == b"{}"
