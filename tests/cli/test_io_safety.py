"""The one funnel: every input or output problem of every command is one escaped error
line and exit status 2 (issue #17: full disks, special files, bombs, hostile names)."""

from __future__ import annotations

import gzip
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from profkit.calltree import file
from profkit.calltree.model import CallNode, CallProfile, Frame, ThreadTree
from profkit.cli.main import main
from tests.calltree.strategies import sample_profile

FIX = Path(__file__).resolve().parents[1] / "fixtures"
PERFMAP = FIX / "perfmap" / "dotnet-info.map"
R2R = FIX / "perfmap" / "System.ComponentModel.EventBasedAsync.ni.r2rmap"
PROFDATA = FIX / "instrprof" / "clang19" / "binary_ids.profdata"


@pytest.fixture(autouse=True)
def _short_fifo_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    """A FIFO nobody writes to is watched for a writer for 2 s; tests need not wait."""
    from profkit import _inputs as inputs_module

    monkeypatch.setattr(inputs_module, "FIFO_GRACE_S", 0.2)


def _has_dev_full() -> bool:
    return os.path.exists("/dev/full") and stat.S_ISCHR(os.stat("/dev/full").st_mode)


def _profkit(*argv: str, stdout: object = None, stdin: object = None, timeout: float = 60):
    return subprocess.run(
        [sys.executable, "-m", "profkit", *argv],
        stdout=stdout if stdout is not None else subprocess.PIPE,
        stdin=stdin if stdin is not None else subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        timeout=timeout,
        check=False,
    )


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("io") / "run.json"
    file.save(sample_profile(), path)
    return path


def _full_disk_commands(saved: Path) -> list[list[str]]:
    return [
        ["report", str(saved)],
        ["report", str(saved), "--view", "flat"],
        ["export", str(saved), "-F", "collapsed", "-o", "-"],
        ["export", str(saved), "-F", "speedscope", "-o", "-"],
        ["export", str(saved), "-F", "chrome", "-o", "-"],
        ["export", str(saved), "-F", "html", "-o", "-"],
        ["export", str(saved), "-F", "pprof", "-o", "-"],
        ["profdata", "show", str(PROFDATA)],
        ["profdata", "show", "--json", str(PROFDATA)],
        ["perfmap", "show", str(PERFMAP)],
        ["perfmap", "lookup", str(R2R), "0x1000"],
        ["perfmap", "convert", str(R2R), "--base", "0x10000", "-o", "-"],
    ]


@pytest.mark.skipif(not _has_dev_full(), reason="no /dev/full character device here")
def test_full_stdout_is_one_error_line_exit_2(saved: Path) -> None:
    """A short write or ENOSPC on stdout: exit 0 with a truncated output before."""
    for argv in _full_disk_commands(saved):
        with open("/dev/full", "wb") as full:
            done = _profkit(*argv, stdout=full)
        err = done.stderr.decode()
        assert done.returncode == 2, (argv, done.returncode, err)
        assert err.count("\n") == 1 and "No space left on device" in err, (argv, err)
        assert "Traceback" not in err


@pytest.mark.skipif(not _has_dev_full(), reason="no /dev/full character device here")
def test_full_output_file_is_one_error_line_exit_2(saved: Path) -> None:
    done = _profkit("export", str(saved), "-F", "speedscope", "-o", "/dev/full")
    assert done.returncode == 2 and b"No space left on device" in done.stderr


def test_tmpfs_full_disk_if_mountable(saved: Path, tmp_path: Path) -> None:
    """The real thing: a 64 KiB tmpfs (only where mounting is permitted, as root)."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        big = CallProfile("trace", [Frame(f"m.f{i}", "f.py", i) for i in range(3000)])
        root = CallNode(-1, 0, 3000, 0)
        for i in range(3000):
            root.children[i] = CallNode(i, 1, 1, 1, 1, 1)
        big.threads.append(ThreadTree(1, "MainThread", root))
        src = tmp_path / "big.json"
        file.save(big, src)
        with open(mnt / "out.txt", "wb") as out:
            done = _profkit("report", str(src), "--all", "--view", "flat", stdout=out)
        assert done.returncode == 2 and b"No space left on device" in done.stderr
        done = _profkit("export", str(src), "-F", "html", "-o", str(mnt / "x.html"))
        assert done.returncode == 2 and b"No space left on device" in done.stderr
        assert not [p for p in os.listdir(mnt) if p.endswith(".tmp")]
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


@pytest.mark.parametrize("command", ["report", "export"])
def test_bad_paths_are_exit_2(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "gone")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    extra = ["-F", "collapsed", "-o", str(tmp_path / "o")] if command == "export" else []
    for path, words in (
        (tmp_path, "directory"),
        (dangling, "symbolic link"),
        (tmp_path / "missing", "no such file"),
        (fifo, "no writer"),
        ("/dev/zero", "character device"),
    ):
        assert main([command, str(path), *extra]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and words in err, (path, err)


def test_stdin_devices_and_garbage_refused_early() -> None:
    with open("/dev/zero", "rb") as zero:
        done = _profkit("report", "-", stdin=zero, timeout=20)
    assert done.returncode == 2 and b"character device" in done.stderr
    # a pipe of endless garbage: judged by its first bytes, not read to the cap
    feeder = subprocess.Popen(["cat", "/dev/urandom"], stdout=subprocess.PIPE)
    try:
        done = _profkit("report", "-", stdin=feeder.stdout, timeout=20)
    finally:
        feeder.kill()
        feeder.wait()
    assert done.returncode == 2 and b"stdin" in done.stderr
    # the same for a perf map: NUL bytes in the first 64 KiB, refused before 1 GiB is read
    for command in (["perfmap", "show", "-"], ["export", "-", "-F", "chrome", "-o", "-"]):
        feeder = subprocess.Popen(["cat", "/dev/zero"], stdout=subprocess.PIPE)
        try:
            done = _profkit(*command, stdin=feeder.stdout, timeout=20)
        finally:
            feeder.kill()
            feeder.wait()
        assert done.returncode == 2 and done.stderr.count(b"\n") == 1, (command, done.stderr)


def test_report_reads_a_profile_from_stdin(saved: Path) -> None:
    with open(saved, "rb") as fh:
        done = _profkit("report", "-", stdin=fh)
    assert done.returncode == 0 and b"myapp.core.work" in done.stdout


def test_gzip_bomb_refused_quickly(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bomb = tmp_path / "bomb.json.gz"
    bomb.write_bytes(gzip.compress(b'{"format": "' + b"A" * (64 << 20), compresslevel=9))
    assert main(["report", str(bomb)]) == 2
    err = capsys.readouterr().err
    assert "decompression bomb" in err and err.count("\n") == 1


def test_perfmap_readers_refuse_special_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for argv in (
        ["perfmap", "show", "/dev/zero"],
        ["perfmap", "lookup", "/dev/zero", "0x1"],
        ["perfmap", "show", str(fifo)],
        ["perfmap", "show", str(tmp_path)],
        ["perfmap", "symbolize", "/dev/zero", "--map", str(PERFMAP), "-o", str(tmp_path / "o")],
        ["perfmap", "symbolize", str(fifo), "--map", str(PERFMAP)],
    ):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1, (argv, err)
    assert os.listdir(tmp_path) == ["fifo"]  # no hidden temp output left


def test_min_time_with_400_digits(saved: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for value in ("1" * 400, "1" * 400 + "s", "9" * 30 + "s", "1e5"):
        assert main(["report", str(saved), "--min-time", value]) == 2, value
        assert capsys.readouterr().err.count("\n") == 1


def test_hostile_names_are_escaped_in_views_and_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    evil = "m.\x1b]0;pwned\x07\x1b[2J\x00\u202eevil" + "x" * 100
    p = CallProfile("trace", [Frame(evil, "f.py", 1)])
    root = CallNode(-1, 0, 10, 0)
    root.children[0] = CallNode(0, 1, 10, 10, 10, 10)
    p.threads.append(ThreadTree(1, "T\x1b[31m", root))
    path = tmp_path / "evil\x1b[2J.json"
    file.save(p, path)
    for view in ("tree", "flat"):
        assert main(["report", str(path), "--view", view, "--width", "400"]) == 0
        out = capsys.readouterr().out
        assert "\x1b" not in out and "\x00" not in out and "\u202e" not in out
        assert "\\x1b]0;pwned\\x07" in out
    assert main(["report", str(path), "--view", "callers", "-f", "nothing-like-it\x1b[2J"]) == 2
    err = capsys.readouterr().err
    assert "\x1b" not in err and err.count("\n") == 1
    # an error naming the file escapes the name too
    (tmp_path / "bad\x1b]0;x\x07.json").write_text("[1]")
    assert main(["report", str(tmp_path / "bad\x1b]0;x\x07.json")]) == 2
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\x07" not in err and err.count("\n") == 1
    # JSON exports keep the name exactly
    out_json = tmp_path / "o.speedscope.json"
    assert main(["export", str(path), "-F", "speedscope", "-o", str(out_json)]) == 0
    import json

    assert json.loads(out_json.read_text())["shared"]["frames"][0]["name"] == evil


def test_huge_names_in_errors_are_cut(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "p.json"
    file.save(sample_profile(), path)
    assert main(["report", str(path), "--view", "callers", "-f", "y" * 5_000_000]) == 2
    err = capsys.readouterr().err
    assert len(err) < 10_000 and err.count("\n") == 1


def test_perfmap_lookup_escapes_map_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    m = tmp_path / "perf-1.map"
    m.write_bytes(b"1000 10 evil\x1b]0;pwned\x07name\n")
    assert main(["perfmap", "lookup", str(m), "0x1004"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\\x1b]0;pwned\\x07" in out
    assert main(["perfmap", "show", str(m)]) == 0
    assert "\x1b" not in capsys.readouterr().out


def test_export_from_stdin_needs_an_output(saved: Path) -> None:
    with open(saved, "rb") as fh:
        done = _profkit("export", "-", "-F", "collapsed", stdin=fh)
    assert done.returncode == 2 and b"-o" in done.stderr
    with open(saved, "rb") as fh:
        done = _profkit("export", "-", "-F", "collapsed", "-o", "-", stdin=fh)
    assert done.returncode == 0 and b"myapp.main" in done.stdout


def test_huge_integers_in_a_profile_are_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = file.to_json(sample_profile())
    text = json.dumps(doc).replace('"version": 1', '"version": ' + "9" * 5000, 1)
    for i, body in enumerate((text, json.dumps(doc).replace("10000000", "1" * 30, 1))):
        path = tmp_path / f"big{i}.json"
        path.write_text(body)
        for argv in (["report", str(path)], ["export", str(path), "-F", "chrome", "-o", "-"]):
            assert main(argv) == 2, argv
            err = capsys.readouterr().err
            assert err.count("\n") == 1 and len(err) < 3000
