"""Correlation (#16 item 2) against live clang/llvm-profdata: binary mode (19, 22) and
debug-info mode (14, 16, 19, 22).

The binary a correlated raw file needs cannot be committed (sources only), so these
tests build it: sample.c with ``-mllvm -profile-correlate=binary`` (and
``-disable-vp=true``: with value profiling the program crashes, spec), run twice with
different arguments. They skip when the toolchain or pyelftools is absent.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.cli.test_profdata_merge import run

SRC = Path(__file__).resolve().parents[1] / "fixtures" / "instrprof" / "src"

pytest.importorskip("elftools", reason="pyelftools is not installed")


def _build(tmp: Path, llvm: int, name: str, source: str = "sample.c", mode: str = "binary") -> Path:
    clang = shutil.which(f"clang-{llvm}")
    if clang is None or shutil.which(f"llvm-profdata-{llvm}") is None:
        pytest.skip(f"clang-{llvm} / llvm-profdata-{llvm} not installed")
    shutil.copy(SRC / source, tmp / source)
    cmd = [clang, "-fprofile-generate", "-O2", "-mllvm", "-disable-vp=true"]
    if mode == "binary":
        cmd += ["-mllvm", "-profile-correlate=binary"]
    elif llvm < 17:  # the LLVM 14-16 spelling
        cmd += ["-g", "-mllvm", "-debug-info-correlate"]
    else:
        cmd += ["-g", "-mllvm", "-profile-correlate=debug-info"]
    cmd += [source, "-o", name, "-Wl,--build-id"]
    done = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        pytest.skip(f"clang-{llvm} cannot build for binary correlation: {done.stderr[:200]}")
    return tmp / name


def _run(tmp: Path, prog: Path, raw: str, *args: str) -> Path:
    env = {**os.environ, "LLVM_PROFILE_FILE": str(tmp / raw)}
    subprocess.run([str(prog), *args], cwd=tmp, env=env, capture_output=True, timeout=60)
    return tmp / raw


@pytest.mark.oracle
@pytest.mark.parametrize("llvm", [19, 22])
def test_binary_file_merge_is_byte_identical(llvm: int, tmp_path: Path) -> None:
    prog = _build(tmp_path, llvm, "prog")
    raws = [_run(tmp_path, prog, "a.profraw"), _run(tmp_path, prog, "b.profraw", "x", "y")]
    theirs = tmp_path / "llvm.profdata"
    tool = f"llvm-profdata-{llvm}"
    subprocess.run(
        [tool, "merge", f"--binary-file={prog}", "-o", str(theirs), *map(str, raws)],
        check=True,
        capture_output=True,
        timeout=60,
    )
    ours = tmp_path / "ours.profdata"
    rc, _, err = run(
        [
            *("profdata", "merge", "--llvm-version", str(llvm), f"--binary-file={prog}"),
            *("-o", str(ours), *map(str, raws)),
        ]
    )
    assert rc == 0, err
    assert ours.read_bytes() == theirs.read_bytes()
    # show of the raw file with its binary: what llvm-profdata shows
    shown = subprocess.run(
        [tool, "show", "--all-functions", "--counts", f"--binary-file={prog}", str(raws[0])],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if shown.returncode == 0:
        rc, out, err = run(
            [
                *("profdata", "show", "--all-functions", "--counts", "--llvm-version", str(llvm)),
                *(f"--binary-file={prog}", str(raws[0])),
            ]
        )
        assert rc == 0, err
        assert out == shown.stdout


@pytest.mark.oracle
def test_wrong_binary_and_missing_flag_are_refused(tmp_path: Path) -> None:
    """llvm-profdata puts counts on the wrong functions with another build's binary, and
    writes an empty profile without --binary-file; profkit refuses both."""
    prog = _build(tmp_path, 22, "prog")
    raw = _run(tmp_path, prog, "a.profraw")
    other = _build(tmp_path, 22, "other", "names.c")
    out = tmp_path / "o.profdata"
    rc, _, err = run(["profdata", "merge", f"--binary-file={other}", "-o", str(out), str(raw)])
    assert rc == 2 and "is not the binary that wrote" in err and not out.exists()
    rc, _, err = run(["profdata", "merge", "-o", str(out), str(raw)])
    assert rc == 2 and "written for correlation" in err and not out.exists()
    plain = tmp_path / "plain"
    shutil.copy(prog, plain)
    subprocess.run(["objcopy", "--remove-section=__llvm_covdata", str(plain)], check=False)
    rc, _, err = run(["profdata", "merge", f"--binary-file={plain}", "-o", str(out), str(raw)])
    if "__llvm_covdata" in err:
        assert rc == 2 and "profile-correlate=binary" in err


@pytest.mark.oracle
@pytest.mark.parametrize("llvm", [14, 16, 19, 22])
def test_debug_info_merge_is_byte_identical(llvm: int, tmp_path: Path) -> None:
    prog = _build(tmp_path, llvm, "prog", mode="debug-info")
    raws = [_run(tmp_path, prog, "a.profraw"), _run(tmp_path, prog, "b.profraw", "x")]
    theirs = tmp_path / "llvm.profdata"
    subprocess.run(
        [f"llvm-profdata-{llvm}", "merge", f"--debug-info={prog}", "-o", str(theirs)]
        + [str(r) for r in raws],
        check=True,
        capture_output=True,
        timeout=60,
    )
    ours = tmp_path / "ours.profdata"
    rc, _, err = run(
        [
            *("profdata", "merge", "--llvm-version", str(llvm), f"--debug-info={prog}"),
            *("-o", str(ours), *map(str, raws)),
        ]
    )
    assert rc == 0, err
    assert ours.read_bytes() == theirs.read_bytes()
