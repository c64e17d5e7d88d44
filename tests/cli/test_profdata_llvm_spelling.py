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
def test_llvm_style_output_option_writes_the_named_file(tmp_path: Path) -> None:
    shutil.copy(RAW, tmp_path / "in.profraw")
    rc, _, err = run(["profdata", "merge", "-output=out.profdata", "in.profraw"], cwd=tmp_path)
    assert not (tmp_path / "utput=out.profdata").exists(), "wrote a file named 'utput=out.profdata'"
    # Either LLVM's meaning (FILE written) or a clear refusal; never a misnamed output.
    assert (tmp_path / "out.profdata").exists() if rc == 0 else rc == 2, err


@pytest.mark.skipif(not RAW.exists(), reason="the clang 22 fixtures are not present")
def test_llvm_one_dash_spellings_mean_what_llvm_profdata_means(tmp_path: Path) -> None:
    shutil.copy(RAW, tmp_path / "in.profraw")
    rc, _, err = run(
        [
            "profdata",
            "merge",
            "-instr",
            "-sparse",
            "-num-threads=1",
            "-output",
            "a.profdata",
            "in.profraw",
        ],
        cwd=tmp_path,
    )
    assert rc == 0, err
    rc, _, err = run(
        ["profdata", "merge", "-binary", "-output=b.profdata", "in.profraw"], cwd=tmp_path
    )
    assert rc == 0, err
    assert (tmp_path / "b.profdata").exists()
    rc, out, err = run(
        ["profdata", "show", "-all-functions", "-counts", "b.profdata"], cwd=tmp_path
    )
    rc2, out2, _ = run(
        ["profdata", "show", "--all-functions", "--counts", "b.profdata"], cwd=tmp_path
    )
    assert (rc, out) == (rc2, out2) and rc == 0, err
    rc, _, err = run(["profdata", "show", "-output=s.txt", "b.profdata"], cwd=tmp_path)
    assert rc == 0, err
    assert not (tmp_path / "utput=s.txt").exists()
    rc, plain, _ = run(["profdata", "show", "b.profdata"], cwd=tmp_path)
    assert (tmp_path / "s.txt").read_text() == plain


@pytest.mark.parametrize("word", ["-outpt=x.profdata", "-oout.profdata", "-sample", "-gcc"])
def test_unknown_one_dash_words_are_refused_not_misread(tmp_path: Path, word: str) -> None:
    rc, _, err = run(["profdata", "merge", word, "in.profraw"], cwd=tmp_path)
    assert rc == 2
    assert err.count("\n") == 1 and repr(word) in err, err
    assert list(tmp_path.iterdir()) == []


def test_values_and_short_forms_are_left_to_argparse() -> None:
    from profkit.cli.main import build_parser
    from profkit.cli.profdata_spelling import translate

    parser = build_parser(only="profdata", others=False)
    argv = ["profdata", "merge", "-j2", "-o", "-", "--function", "-x", "-o=/tmp/y", "a", "--", "-z"]
    assert translate(parser, argv) == argv
    assert translate(parser, ["profdata", "overlap", "-cs", "a", "b"])[2:] == ["--cs", "a", "b"]
    assert translate(parser, ["run", "-output=x"]) == ["run", "-output=x"]
