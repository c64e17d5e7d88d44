"""Every byte profkit writes to stdout goes through one checked writer (issue #22 item 5).

``profdata show > file`` and ``profdata merge --text -o -`` handed their whole output to
``sys.stdout.buffer.write`` in one call; on a disk with less room than that, the kernel
took part of it, the error that followed was lost, and profkit exited 0 with a truncated
file. Two ways to fill the disk, for every command that writes to stdout:

* ``/dev/full``: every write fails with ENOSPC;
* a regular file under ``RLIMIT_FSIZE`` (``SIGXFSZ`` ignored): the kernel takes the bytes
  up to the limit (a *short* write) and refuses the next write with EFBIG — the case that
  used to end in exit 0.

Either way: one ``profkit: error: cannot write to stdout: ...`` line and exit status 2,
as ``report`` and ``export`` already did.
"""

from __future__ import annotations

import os
import resource
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from profkit.calltree import file
from tests.calltree.strategies import sample_profile

FIX = Path(__file__).resolve().parents[1] / "fixtures"
C22 = FIX / "instrprof" / "clang22"
R2R = FIX / "perfmap" / "System.ComponentModel.EventBasedAsync.ni.r2rmap"
PERFMAP = FIX / "perfmap" / "dotnet-info.map"
#: Bytes a short write lets through: less than any command below prints.
LIMIT = 64

COMMANDS = {
    "profdata show": ["profdata", "show", "--all-functions", "--counts", str(C22 / "fe.profdata")],
    "profdata show --json": ["profdata", "show", "--json", str(C22 / "fe.profdata")],
    "profdata merge --text -o -": [
        "profdata",
        "merge",
        "--text",
        str(C22 / "fe.profraw"),
        "-o",
        "-",
    ],
    "profdata merge -o -": [
        "profdata",
        "merge",
        "--llvm-default",
        str(C22 / "fe.profraw"),
        "-o",
        "-",
    ],
    "profdata overlap": ["profdata", "overlap", str(C22 / "fe.profdata"), str(C22 / "ir.profdata")],
    "perfmap show": ["perfmap", "show", str(PERFMAP)],
    "perfmap show r2rmap": ["perfmap", "show", "--json", str(R2R)],
    "perfmap lookup": [
        "perfmap",
        "lookup",
        str(R2R),
        "0x1000",
        "0x2000",
        "0x3000",
        "0x4000",
        "0x5000",
        "0x6000",
    ],
    "perfmap convert -o -": ["perfmap", "convert", str(R2R), "--base", "0x10000", "-o", "-"],
    "report": ["report", "@SAVED"],
    "export -o -": ["export", "@SAVED", "-F", "collapsed", "-o", "-"],
}


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("stdout") / "run.json"
    file.save(sample_profile(), path)
    return path


def _argv(name: str, saved: Path) -> list[str]:
    return [str(saved) if a == "@SAVED" else a for a in COMMANDS[name]]


def _profkit(
    argv: list[str], stdout: object, limit: int | None = None
) -> subprocess.CompletedProcess:
    def lower_limit() -> None:  # in the child only: pytest's own files stay unlimited
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))

    return subprocess.run(
        [sys.executable, "-m", "profkit", *argv],
        stdout=stdout,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        preexec_fn=lower_limit if limit is not None else None,
        timeout=120,
        check=False,
    )


def _one_error_line(done: subprocess.CompletedProcess, reason: str) -> None:
    err = done.stderr.decode()
    errors = [line for line in err.splitlines() if line.startswith("profkit: error:")]
    assert done.returncode == 2, err
    assert errors == [f"profkit: error: cannot write to stdout: {reason}"], err
    assert "Traceback" not in err


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_short_write_on_stdout_is_an_error(name: str, saved: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    with open(out, "wb") as fh:
        whole = _profkit(_argv(name, saved), fh)
    assert whole.returncode == 0 and out.stat().st_size > LIMIT, whole.stderr
    with open(out, "wb") as fh:
        done = _profkit(_argv(name, saved), fh, limit=LIMIT)
    _one_error_line(done, os.strerror(27))  # EFBIG: "File too large"
    assert out.stat().st_size <= LIMIT


@pytest.mark.skipif(
    not (os.path.exists("/dev/full") and stat.S_ISCHR(os.stat("/dev/full").st_mode)),
    reason="no /dev/full character device here",
)
@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_full_device_on_stdout_is_an_error(name: str, saved: Path) -> None:
    with open("/dev/full", "wb") as full:
        done = _profkit(_argv(name, saved), full)
    _one_error_line(done, os.strerror(28))  # ENOSPC
