"""#16 item 3 against live compilers: the default merge output is read by the clang that
wrote the raw inputs (clang 14 refuses llvm-profdata-22's default, indexed v13)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from profkit.cli.main import main

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "instrprof"


@pytest.mark.oracle
@pytest.mark.parametrize("llvm", [14, 16, 19, 22])
def test_clang_reads_the_default_output_of_its_raw_files(llvm: int, tmp_path: Path) -> None:
    clang = shutil.which(f"clang-{llvm}")
    if clang is None:
        pytest.skip(f"clang-{llvm} is not installed")
    raw = FIX / f"clang{llvm}" / "ir.profraw"
    shutil.copy(FIX / "src" / "sample.c", tmp_path / "sample.c")
    out = tmp_path / "default.profdata"
    assert main(["profdata", "merge", "-o", str(out), str(raw)]) == 0

    def use(profile: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [clang, "-O2", f"-fprofile-use={profile}", "-c", "sample.c", "-o", "sample.o"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )

    done = use(out)
    assert done.returncode == 0 and "unsupported" not in done.stderr, done.stderr
    if llvm < 22:  # the contrast: llvm-profdata-22's default is what older clangs refuse
        newest = tmp_path / "v13.profdata"
        assert main(["profdata", "merge", "--llvm-default", "-o", str(newest), str(raw)]) == 0
        refused = use(newest)
        assert refused.returncode != 0 or "unsupported" in refused.stderr
