"""A new user's finding (notes/s6/findings.md): build scripts call llvm-profdata with LLVM's
own option spelling, `-output=FILE` (one dash, `=`). llvm-profdata writes FILE; profkit's
argparse reads it as `-o` followed by the attached value `utput=FILE`, exits 0 and writes a
file named `utput=FILE`. A silently misnamed output is worse than a refusal,
so either is accepted here."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.cli.test_profdata_merge import FIX, run

RAW = FIX / "clang22" / "binary_ids.profraw"


@pytest.mark.skipif(not RAW.exists(), reason="the clang 22 fixtures are not present")
@pytest.mark.xfail(strict=True, reason="-output=FILE is parsed as -o 'utput=FILE'")
def test_llvm_style_output_option_writes_the_named_file(tmp_path: Path) -> None:
    shutil.copy(RAW, tmp_path / "in.profraw")
    rc, _, err = run(["profdata", "merge", "-output=out.profdata", "in.profraw"], cwd=tmp_path)
    assert not (tmp_path / "utput=out.profdata").exists(), "wrote a file named 'utput=out.profdata'"
    # Either LLVM's meaning (FILE written) or a clear refusal; never a misnamed output.
    assert (tmp_path / "out.profdata").exists() if rc == 0 else rc == 2, err
