"""profkit vs the saved outputs of real llvm-profdata, over every fixture in the manifest.

Each saved tool output in tests/fixtures/instrprof/ is replayed through ``profkit profdata``
with the same options (and ``--llvm-version NN`` for the wording/dialect of that LLVM):

* ``show``     — text identical to ``llvm-profdata-NN show <options>``;
* ``merge --text`` — identical to the saved ``.proftext``;
* ``merge -o`` — indexed file byte-identical to ``llvm-profdata-NN merge``, written with
  ``--indexed-version V`` (V read from the saved file), including the ``cross/`` files that
  every llvm-profdata wrote from the same text input;
* ``overlap``  — identical report.

Known differences are ``xfail(strict=True)`` with the reason, so the pass/xfail table is an
honest account of what matches; a fixed difference turns into an XPASS failure and must be
removed from the table.  Test ids are the fixture paths.
"""

from __future__ import annotations

import contextlib
import io
import struct
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

import pytest

from profkit.cli.main import main
from tests.oracle.helpers import (
    FIXTURE_ROOT,
    Fixture,
    fixtures,
    profkit_help,
    profkit_merge_available,
)

# A saved output profkit deliberately or knowingly does not reproduce: path -> reason.
KNOWN_DIFFERENCES: dict[str, str] = {
    # LLVM 14/16 print only the last profile's binary ID of a multi-profile raw file
    # (spec §7.3, fixed in LLVM 18); profkit prints all of them.
    "clang14/dso_concat.profraw.binary-ids.txt": "LLVM 14 bug: only the last binary ID",
    "clang16/dso_concat.profraw.binary-ids.txt": "LLVM 16 bug: only the last binary ID",
    "clang16/dso_concat.profdata": "LLVM 16 bug: merge keeps only the last binary ID of a "
    "multi-profile raw file (spec §7.5); profkit keeps both",
}
# Outputs that cannot be replayed from the committed files at all: path prefix -> reason.
NOT_REPLAYABLE = {
    "ir_dbgcorrelate.correlated": "made with --debug-info=<binary>; the binary is not kept",
}


def _cases(entries: Iterable[Fixture]) -> list[object]:
    """pytest params with fixture-path ids; known differences become strict xfails."""
    params: list[object] = []
    for fx in entries:
        marks = []
        if fx.rel in KNOWN_DIFFERENCES:
            marks.append(pytest.mark.xfail(strict=True, reason=KNOWN_DIFFERENCES[fx.rel]))
        params.append(pytest.param(fx, id=fx.rel, marks=marks))
    return params


def _replayable(fx: Fixture) -> bool:
    return not any(key in fx.rel for key in NOT_REPLAYABLE)


def _profkit(
    argv: list[str], cwd: Path, monkeypatch: pytest.MonkeyPatch, n_inputs: int = 1
) -> tuple[int, str, str]:
    """Run ``profkit <argv>`` from ``cwd`` (the saved commands use relative paths).

    In-process, except merges of 3+ inputs: like llvm-profdata, profkit then splits the work
    over 2 writers in worker processes, and those must not fork the multi-threaded test
    process (deadlock risk), so they run in a subprocess.
    """
    if argv[:2] == ["profdata", "merge"] and n_inputs >= 3:
        proc = subprocess.run(
            [sys.executable, "-m", "profkit", *argv],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=120,
        )
        return proc.returncode, proc.stdout, proc.stderr
    monkeypatch.chdir(cwd)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(argv)
    return rc, out.getvalue(), err.getvalue()


def _translate(fx: Fixture, output: Path | None) -> list[str]:
    """The saved llvm-profdata command line as profkit arguments (output redirected)."""
    tool, sub, *rest = fx.command
    assert tool.startswith("llvm-profdata-"), fx.command
    args = list(rest)
    if output is not None:
        at = args.index("-o")
        args[at + 1] = str(output)
    return ["profdata", sub, *args]


def _llvm_version(fx: Fixture) -> str:
    assert fx.llvm is not None
    return str(fx.llvm)


OVERLAP_HAS_LLVM_VERSION = "--llvm-version" in profkit_help("profdata", "overlap")


needs_merge = pytest.mark.skipif(
    not profkit_merge_available(), reason="profkit profdata merge/overlap not implemented yet"
)

SHOWS = [fx for fx in fixtures(kind="show") if _replayable(fx)]
TEXTS = [fx for fx in fixtures(kind="proftext") if _replayable(fx)]
INDEXED = [fx for fx in fixtures(kind="profdata") if _replayable(fx)]
OVERLAPS = list(fixtures(kind="overlap"))


def _overlap_cases() -> list[object]:
    params: list[object] = []
    for fx in OVERLAPS:
        marks = []
        if not OVERLAP_HAS_LLVM_VERSION and fx.llvm is not None and fx.llvm < 22:
            marks.append(
                pytest.mark.xfail(
                    strict=True,
                    reason="LLVM 14-19 print 'Profile overlap infomation' (sic); "
                    "profkit overlap has LLVM 22's wording and no --llvm-version yet",
                )
            )
        params.append(pytest.param(fx, id=fx.rel, marks=marks))
    return params


@pytest.mark.parametrize("fx", _cases(SHOWS))
def test_show(fx: Fixture, monkeypatch: pytest.MonkeyPatch) -> None:
    argv = [*_translate(fx, None), "--llvm-version", _llvm_version(fx)]
    rc, out, err = _profkit(argv, FIXTURE_ROOT / Path(fx.rel).parent, monkeypatch)
    assert rc == 0, err
    assert out == fx.read_text()


@needs_merge
@pytest.mark.parametrize("fx", _cases(TEXTS))
def test_merge_text(fx: Fixture, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    target = tmp_path / "out.proftext"
    argv = [*_translate(fx, target), "--llvm-version", _llvm_version(fx)]
    rc, _, err = _profkit(argv, FIXTURE_ROOT / Path(fx.rel).parent, monkeypatch, len(fx.inputs))
    assert rc == 0, err
    assert target.read_text() == fx.read_text()


@needs_merge
@pytest.mark.parametrize("fx", _cases(INDEXED))
def test_merge_indexed(fx: Fixture, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    target = tmp_path / "out.profdata"
    expected = fx.read_bytes()
    (word,) = struct.unpack_from("<Q", expected, 8)
    argv = [*_translate(fx, target), "--indexed-version", str(word & 0xFFFFFFFF)]
    rc, _, err = _profkit(argv, FIXTURE_ROOT / Path(fx.rel).parent, monkeypatch, len(fx.inputs))
    assert rc == 0, err
    assert target.read_bytes() == expected


@needs_merge
@pytest.mark.parametrize("fx", _overlap_cases())
def test_overlap(fx: Fixture, monkeypatch: pytest.MonkeyPatch) -> None:
    argv = _translate(fx, None)
    if OVERLAP_HAS_LLVM_VERSION:
        argv += ["--llvm-version", _llvm_version(fx)]
    rc, out, err = _profkit(argv, FIXTURE_ROOT / Path(fx.rel).parent, monkeypatch)
    assert rc == 0, err
    assert out == fx.read_text()
