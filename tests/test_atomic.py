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
