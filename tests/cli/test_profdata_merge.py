"""`profkit profdata merge` / `overlap`: every merge and overlap command of the fixture
manifest replayed through our CLI (byte-identical output), plus the options LLVM has and
the behaviour we add (failure modes, -j, kind checks)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from profkit.cli.main import main

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "instrprof"
_MANIFEST = (
    json.loads((FIX / "MANIFEST.json").read_text())
    if (FIX / "MANIFEST.json").exists()
    else {"files": []}
)
_UNSUPPORTED = ("--debug-info", "--binary-file", "--correlate", "--profiled-binary")
#: LLVM 16's raw reader keeps only the last binary ID of a multi-profile file (spec §7.3).
_KNOWN_DIFFERENCES = {"clang16/dso_concat.profdata"}


def _entries(kind: str, sub: str) -> list[Any]:
    out = []
    for entry in _MANIFEST["files"]:
        cmd = entry.get("command")
        if entry.get("kind") != kind or not cmd or cmd[1] != sub:
            continue
        if any(a.startswith(_UNSUPPORTED) for a in cmd):
            continue
        marks = [pytest.mark.xfail(strict=True)] if entry["path"] in _KNOWN_DIFFERENCES else []
        out.append(pytest.param(entry, id=entry["path"], marks=marks))
    return out


def run(args: list[str], cwd: Path | None = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    old = os.getcwd()
    if cwd is not None:
        os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = main(args)
    finally:
        os.chdir(old)
    return rc, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("entry", _entries("profdata", "merge") + _entries("proftext", "merge"))
def test_replays_llvm_merge_byte_identically(entry: dict[str, Any], tmp_path: Path) -> None:
    cmd = entry["command"]
    llvm = cmd[0].rsplit("-", 1)[1]
    args = list(cmd[2:])
    i = args.index("-o")
    args[i + 1] = str(tmp_path / "out")
    rc, _, err = run(["profdata", "merge", "--llvm-version", llvm, *args], FIX / entry["cwd"])
    assert rc == 0, err
    assert (tmp_path / "out").read_bytes() == (FIX / entry["path"]).read_bytes()


@pytest.mark.parametrize("entry", _entries("overlap", "overlap"))
def test_replays_llvm_overlap(entry: dict[str, Any]) -> None:
    cmd = entry["command"]
    llvm = cmd[0].rsplit("-", 1)[1]
    rc, out, err = run(
        ["profdata", "overlap", "--llvm-version", llvm, *cmd[2:]], FIX / entry["cwd"]
    )
    assert rc == 0, err
    assert out == (FIX / entry["path"]).read_text()


@pytest.fixture
def ir_inputs(tmp_path: Path) -> Path:
    src = FIX / "clang22"
    if not (src / "ir.profraw").exists():
        pytest.skip("fixtures missing")
    for name in ("ir.profraw", "ir_alt.profraw", "ir.proftext", "fe.profraw"):
        shutil.copy(src / name, tmp_path / name)
    return tmp_path


def test_input_list_directories_and_weights(ir_inputs: Path) -> None:
    d = ir_inputs
    (d / "sub").mkdir()
    shutil.copy(d / "ir_alt.profraw", d / "sub" / "x.profraw")
    (d / "list.txt").write_text("# inputs\n\n3,ir.profraw\n")
    # --llvm-default: compared with llvm-profdata-22's default output (indexed v13)
    rc, _, err = run(
        ["profdata", "merge", "--llvm-default", "-f", "list.txt", "sub", "-o", "a.profdata"], d
    )
    assert rc == 0, err
    rc, _, err = run(
        [
            "profdata",
            "merge",
            "--llvm-default",
            "--weighted-input=3,ir.profraw",
            "ir_alt.profraw",
            "-o",
            "b.profdata",
        ],
        d,
    )
    assert rc == 0, err
    assert (d / "a.profdata").read_bytes() == (d / "b.profdata").read_bytes()
    expected = FIX / "clang22" / "weighted.profdata"
    assert (d / "b.profdata").read_bytes() == expected.read_bytes()


def test_parallel_equals_serial(ir_inputs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import profkit.formats.instrprof.merge.files as mf

    monkeypatch.setattr(mf.threading, "active_count", lambda: 1)  # xdist runs helper threads
    d = ir_inputs
    inputs = []
    for i in range(6):
        name = f"r{i}.profraw"
        shutil.copy(d / ("ir.profraw" if i % 2 else "ir_alt.profraw"), d / name)
        inputs.append(name)
    inputs.append("ir.proftext")
    assert run(["profdata", "merge", "-j", "1", *inputs, "-o", "s.profdata"], d)[0] == 0
    assert run(["profdata", "merge", "-j", "3", *inputs, "-o", "p.profdata"], d)[0] == 0
    assert (d / "s.profdata").read_bytes() == (d / "p.profdata").read_bytes()


def test_failure_modes(ir_inputs: Path) -> None:
    d = ir_inputs
    (d / "bad.profraw").write_bytes((d / "ir.profraw").read_bytes()[:100])
    rc, _, err = run(["profdata", "merge", "ir.profraw", "bad.profraw", "-o", "o"], d)
    assert rc == 2
    assert "profkit: warning: bad.profraw: " in err
    assert err.strip().splitlines()[-1].startswith("profkit: error: 1 of 2 input(s)")
    assert not (d / "o").exists()
    assert (
        run(["profdata", "merge", "--failure-mode=all", "ir.profraw", "bad.profraw", "-o", "o"], d)[
            0
        ]
        == 0
    )
    rc, _, err = run(["profdata", "merge", "--failure-mode=all", "bad.profraw", "-o", "o2"], d)
    assert rc == 2
    rc, _, err = run(["profdata", "merge", "--failure-mode=warn", "bad.profraw", "-o", "o3"], d)
    assert rc == 0 and "bad.profraw" in err
    assert "\r" not in err  # no progress bar when stderr is not a terminal


def test_refuses_front_end_with_ir_even_for_binary_inputs(ir_inputs: Path) -> None:
    rc, _, err = run(["profdata", "merge", "ir.profraw", "fe.profraw", "-o", "o"], ir_inputs)
    assert rc == 2
    assert "front-end" in err and "IR-level" in err and "fe.profraw" in err


def test_usage_errors(ir_inputs: Path) -> None:
    d = ir_inputs
    assert run(["profdata", "merge", "missing.profraw", "-o", "o"], d)[0] == 2
    assert run(["profdata", "merge", "--weighted-input=0,ir.profraw", "-o", "o"], d)[0] == 2
    assert run(["profdata", "merge", "--weighted-input=ir.profraw", "-o", "o"], d)[0] == 2
    rc, _, err = run(["profdata", "merge", "--indexed-version", "3", "ir.profraw", "-o", "o"], d)
    assert rc == 2 and "supported versions" in err


def test_text_output_and_overlap_to_file(ir_inputs: Path) -> None:
    d = ir_inputs
    assert run(["profdata", "merge", "--text", "ir.profraw", "-o", "t.proftext"], d)[0] == 0
    assert (d / "t.proftext").read_bytes() == (d / "ir.proftext").read_bytes()
    rc, out, _ = run(["profdata", "overlap", "ir.profraw", "ir_alt.profraw", "-o", "ov.txt"], d)
    assert rc == 0 and out == ""
    assert (
        (d / "ov.txt")
        .read_text()
        .startswith("Profile overlap information for base_profile: ir.profraw")
    )


def test_output_to_stdout(ir_inputs: Path) -> None:
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "profkit", "profdata", "merge", "--text", "ir.profraw", "-o", "-"],
        cwd=ir_inputs,
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == (ir_inputs / "ir.proftext").read_bytes()


def test_function_filters(ir_inputs: Path) -> None:
    d = ir_inputs
    rc, _, err = run(
        [
            "profdata",
            "merge",
            "--text",
            "--function=a",
            "--no-function=apply",
            "ir.profraw",
            "-o",
            "f.proftext",
        ],
        d,
    )
    assert rc == 0
    assert "of 8 functions in the original profile are filtered." in err
    text = (d / "f.proftext").read_text()
    assert "apply\n" not in text and "main\n" in text
    assert run(["profdata", "merge", "--function=(", "ir.profraw", "-o", "x"], d)[0] == 2


def test_input_order_is_llvms(tmp_path: Path) -> None:
    """Positional inputs, then --weighted-input, then -f lists: the first record wins."""
    (tmp_path / "a.proftext").write_text("f\n1\n1\n5\n")
    (tmp_path / "b.proftext").write_text("f\n1\n2\n7\n8\n")
    (tmp_path / "list.txt").write_text("b.proftext\n")
    for args in (
        ["--weighted-input=1,b.proftext", "a.proftext"],
        ["-f", "list.txt", "--weighted-input=1,a.proftext"],
    ):
        rc, _, err = run(["profdata", "merge", "--text", *args, "-o", "o.proftext"], tmp_path)
        assert rc == 0
        assert "counter mismatch" in err
        assert "# Counter Values:\n5\n" in (tmp_path / "o.proftext").read_text()


@pytest.mark.parametrize(
    ("inputs", "version", "why"),
    [
        (["clang14/ir.profraw"], 7, "raw v8 inputs come from clang 14-17"),
        (["clang22/ir.profraw"], 12, "raw v10 inputs come from clang 19-22"),
        (["clang22/ir.profraw", "clang16/ir.profdata"], 9, "an indexed v9 input"),
        (["clang22/ir.proftext"], 13, "text only"),
        (["clang22/ir_loopentries.profraw"], 13, "loop-entry profiles need v13"),
    ],
)
def test_default_version_is_what_the_producer_reads(
    inputs: list[str], version: int, why: str, tmp_path: Path
) -> None:
    """#16 item 3: no --indexed-version/--llvm-version: the newest version the clang that
    made the inputs can read (a Debian 12 clang 14 could not read llvm-profdata-22's v13),
    said on stderr once written; --llvm-default keeps llvm-profdata's v13."""
    from profkit.formats.instrprof import read_profile

    out = tmp_path / "o.profdata"
    rc, _, err = run(["profdata", "merge", "-o", str(out), *[str(FIX / i) for i in inputs]])
    assert rc == 0, err
    assert read_profile(out).version == version
    assert f"note: wrote indexed v{version}: " in err and why in err
    rc, _, err = run(["profdata", "merge", "--llvm-default", "-o", str(out), str(FIX / inputs[0])])
    assert rc == 0 and read_profile(out).version == 13
    assert "note:" not in err


def _text(counts: int, hash_: int, n: int) -> str:
    out = [":ir"]
    for i in range(n):
        out += [f"f{i}", "# Func Hash:", str(hash_), "# Num Counters:", str(counts)]
        out += ["# Counter Values:", *["1"] * counts, ""]
    return "\n".join(out) + "\n"


def test_show_mismatched_caps_warnings_and_names_hash_splits(tmp_path: Path) -> None:
    """#16: 25 functions whose counter counts differ: 20 named, the rest counted; names
    whose hashes differ between inputs are named in one line (first N)."""
    (tmp_path / "a.proftext").write_text(_text(2, 7, 25))
    (tmp_path / "b.proftext").write_text(_text(3, 7, 25))
    (tmp_path / "c.proftext").write_text(_text(2, 8, 25))
    args = ["profdata", "merge", "-o", "o.profdata", "a.proftext", "b.proftext", "c.proftext"]
    rc, _, err = run(args, tmp_path)
    assert rc == 0, err
    lines = err.splitlines()
    assert sum("counter mismatch" in line for line in lines) == 20
    assert any("5 more mismatch warning(s) not shown" in line for line in lines)
    split = [line for line in lines if "different hashes" in line]
    assert len(split) == 1 and "25 function(s)" in split[0]
    assert split[0].rsplit(": ", 1)[1].split(", ") == [f"f{i}" for i in range(20)]
    rc, _, err = run([*args, "--show-mismatched", "0"], tmp_path)
    assert rc == 0 and err.count("counter mismatch") == 25 and "not shown" not in err


def test_bad_inputs_file_lists_what_was_skipped(tmp_path: Path) -> None:
    good = FIX / "clang22" / "ir.profraw"
    (tmp_path / "cut.profraw").write_bytes(good.read_bytes()[:100])
    bad = tmp_path / "bad.txt"
    args = ["profdata", "merge", "--failure-mode=warn", "--bad-inputs", str(bad)]
    (tmp_path / "dir.profraw").mkdir()
    (tmp_path / "dir.profraw" / "x.profraw").write_bytes(b"\x00" * 64)
    rc, _, err = run([*args, "-o", "o.profdata", str(good), "cut.profraw", "dir.profraw"], tmp_path)
    assert rc == 0, err
    assert bad.read_text().splitlines() == ["cut.profraw", "dir.profraw/x.profraw"]


@pytest.mark.parametrize("llvm", [14, 16, 19, 22])
def test_correlated_raw_file_is_refused_without_its_binary(llvm: int, tmp_path: Path) -> None:
    """llvm-profdata merges a raw file written for correlation, given no binary, into an
    empty profile without a word; profkit refuses it, naming the flags that read it."""
    raw = FIX / f"clang{llvm}" / "ir_dbgcorrelate.profraw"
    if not raw.exists():
        pytest.skip("fixture absent")
    out = tmp_path / "o.profdata"
    rc, _, err = run(["profdata", "merge", "-o", str(out), str(raw)])
    assert rc == 2 and not out.exists()
    assert "written for correlation" in err and "--binary-file=BIN" in err
    good = FIX / f"clang{llvm}" / "ir.profraw"
    args = ["profdata", "merge", "--failure-mode=warn", "-o", str(out), str(good), str(raw)]
    rc, _, err = run(args)
    assert rc == 0 and "written for correlation" in err
