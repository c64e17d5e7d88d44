"""`profkit profdata show`: output, options, and the one-line error contract."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from profkit.cli.main import main
from tests.formats.instrprof.rawbuild import RawFunc, build_raw


@pytest.fixture
def raw_file(tmp_path: Path) -> Path:
    path = tmp_path / "app.profraw"
    path.write_bytes(
        build_raw(
            [RawFunc("main", 0x1234, [100, 1, 75]), RawFunc("f", 7, [25])],
            flags=1 << 56,
            binary_ids=(bytes(range(20)),),
        )
    )
    return path


def test_show_all_counts(raw_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profdata", "show", "--all-functions", "--counts", str(raw_file)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Counters:\n  main:\n    Hash: 0x0000000000001234\n    Counters: 3\n")
    assert "    Block counts: [100, 1, 75]\n" in out
    assert out.endswith("Total number of blocks: 4\nTotal count: 201\n")


def test_binary_ids_alias(raw_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profdata", "show", "--show-binary-ids", str(raw_file)]) == 0
    assert capsys.readouterr().out.endswith("Binary IDs: \n" + bytes(range(20)).hex() + "\n")


def test_json_and_output_file(raw_file: Path, tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    assert (
        main(["profdata", "show", "--json", "--all-functions", "-o", str(target), str(raw_file)])
        == 0
    )
    doc = json.loads(target.read_text())
    assert doc["format"] == "raw" and doc["version"] == 10
    assert [f["name"] for f in doc["functions"]] == ["main", "f"]
    assert doc["summary"]["total_count"] == 201


def test_truncated_file_is_one_line(raw_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = raw_file.read_bytes()
    raw_file.write_bytes(data[:200])
    assert main(["profdata", "show", str(raw_file)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith(f"profkit: error: {raw_file}: offset 0x")
    assert "truncated" in err


def test_unsupported_raw_version(raw_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = bytearray(raw_file.read_bytes())
    struct.pack_into("<Q", data, 8, 12)
    raw_file.write_bytes(bytes(data))
    assert main(["profdata", "show", str(raw_file)]) == 2
    err = capsys.readouterr().err
    assert "unsupported version: raw profile version 12 (supported: 5, 7, 8, 9, 10, 11)" in err


def test_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profdata", "show", str(tmp_path / "nope.profraw")]) == 2
    assert "profkit: error:" in capsys.readouterr().err


def test_empty_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "empty.profraw"
    empty.write_bytes(b"")
    assert main(["profdata", "show", str(empty)]) == 2
    assert "empty raw profile" in capsys.readouterr().err


def test_not_a_profile(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"\x00\x01\x02\x03" * 4)
    assert main(["profdata", "show", str(junk)]) == 2
    assert "bad magic" in capsys.readouterr().err


def test_profdata_without_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profdata"]) == 2
    assert "show" in capsys.readouterr().err


def test_subcommand_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profdata", "show", "--help"]) == 0
    assert "--all-functions" in capsys.readouterr().out


def test_python_dash_m(raw_file: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "profkit", "profdata", "show", "--covered", str(raw_file)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout == "main\nf\n"


def test_undecodable_names_are_written_back_as_bytes(tmp_path: Path) -> None:
    path = tmp_path / "odd.profraw"
    data = build_raw([RawFunc("caf\udce9", 1, [3])], flags=1 << 56)  # name bytes b"caf\xe9"
    path.write_bytes(data)
    out = subprocess.run(
        [sys.executable, "-m", "profkit", "profdata", "show", "--covered", str(path)],
        capture_output=True,
        check=True,
    )
    assert out.stdout == b"caf\xe9\n"
