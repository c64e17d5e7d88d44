"""`profkit perfmap`: show, lookup, convert, symbolize, verify, and bad input."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from profkit.cli.main import main
from profkit.formats.perfmap.perfpid import read_perf_map
from profkit.formats.perfmap.r2rmap import read_r2rmap

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "perfmap"
R2R = FIX / "System.ComponentModel.EventBasedAsync.ni.r2rmap"
DOTNET = FIX / "dotnet-info.map"
DLL = FIX / "MinimalR2R.dll"
DLL_MAP = FIX / "MinimalR2R.ni.r2rmap"
BASE = 0x7F1484000000


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(["perfmap", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_show_r2rmap_text_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(capsys, "show", str(R2R))
    assert rc == 0
    assert "os_name: Linux" in out and "architecture_name: X64" in out and "entries: 71" in out
    rc, out, _ = run(capsys, "show", str(R2R), "--json")
    info = json.loads(out)
    assert info["header"]["signature"] == "734D59D6DE0E96AA3C77B3E2ED498097"
    assert info["header"]["abi_name"] == "Default" and info["entries"] == 71
    assert info["symbol_server_key"].startswith(
        "system.componentmodel.eventbasedasync.ni.r2rmap/r2rmap-v1-734d59d6"
    )


def test_show_other_kinds(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    rc, out, _ = run(capsys, "show", str(DOTNET), "--json")
    assert json.loads(out)["entries"] == 2435
    rc, out, _ = run(capsys, "show", str(DLL), "--json")
    assert json.loads(out)["perfmap_entry"]["file_name"] == "MinimalR2R.ni.r2rmap"
    pi = tmp_path / "perfinfo-1.map"
    pi.write_text("ImageLoad;/a/X.dll;{2C3F4D7E-1A2B-4C5D-8E9F-0A1B2C3D4E5F};0x7f0000000000;\n")
    rc, out, _ = run(capsys, "show", str(pi), "--json")
    assert rc == 0
    assert json.loads(out)["image_loads"][0]["base"] == 0x7F0000000000


def test_lookup_in_order_with_not_found(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(capsys, "lookup", str(R2R), "0x122f0", "10", "000115D0", "0x127ad")
    assert rc == 0
    assert out.splitlines() == [
        "0x122f0 System.ComponentModel.BackgroundWorker::RunWorkerAsync(System.Object)+0x0",
        "0x10 [unknown]",
        "0x115d0 Microsoft.CodeAnalysis.EmbeddedAttribute::.ctor()+0x0",
        "0x127ad [unknown]",
    ]
    rc, out, _ = run(capsys, "lookup", str(R2R), hex(BASE + 0x115D5), "--base", hex(BASE))
    assert out.endswith("EmbeddedAttribute::.ctor()+0x5\n")
    rc, out, _ = run(capsys, "lookup", str(DOTNET), "7F1484580019")
    assert out == "0x7f1484580019 stub<1> AllocateTemporaryEntryPoints<PRECODE_FIXUP>+0x1\n"


def test_lookup_bad_address(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run(capsys, "lookup", str(R2R), "0xzz")
    assert (rc, out) == (2, "")
    assert err.count("\n") == 1 and "not a hex number" in err


def _digest(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def test_convert_with_base(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    before = _digest(R2R)
    out = tmp_path / "perf-42.map"
    rc, stdout, err = run(capsys, "convert", str(R2R), "--base", hex(BASE), "-o", str(out))
    assert rc == 0 and stdout == "" and "71 entries" in err
    assert _digest(R2R) == before
    m = read_perf_map(out.read_bytes())
    r = read_r2rmap(R2R.read_bytes())
    assert m.names == r.names
    assert m.starts.tolist() == [BASE + a for a in r.rvas.tolist()]
    first = out.read_text().splitlines()[0]
    assert first == f"{BASE + 0x115D0:x} d Microsoft.CodeAnalysis.EmbeddedAttribute::.ctor()"
    assert [p.name for p in tmp_path.iterdir()] == ["perf-42.map"]


def test_convert_append_keeps_existing_bytes(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    target = tmp_path / "perf-7.map"
    shutil.copy(DOTNET, target)
    rc, _, _ = run(
        capsys, "convert", str(R2R), "--base", hex(BASE), "-o", str(target), "--append",
        "--assembly-prefix",
    )  # fmt: skip
    assert rc == 0
    data = target.read_bytes()
    assert data.startswith(DOTNET.read_bytes())
    m = read_perf_map(data)
    assert len(m) == 2435 + 71
    assert (
        m.names[2435]
        == "[System.ComponentModel.EventBasedAsync] Microsoft.CodeAnalysis.EmbeddedAttribute::.ctor()"
    )
    # the appended lines follow the existing file's style (16 uppercase digits)
    assert data.splitlines()[2435].startswith(f"{BASE + 0x115D0:016X} d ".encode())


def test_convert_bases_from_perfinfo_and_proc_maps(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    pi = tmp_path / "perfinfo-9.map"
    pi.write_text(
        "ImageLoad;/usr/lib/dotnet/System.ComponentModel.EventBasedAsync.dll;"
        "{99D3F272-C6A8-429B-A694-647A7912D178};00007F1484000000;\n"
    )
    maps = tmp_path / "maps"
    maps.write_text(
        "7f1485000000-7f1485002000 r--p 00000000 08:01 7 /x/System.ComponentModel.EventBasedAsync.dll\n"
        "7f1485002000-7f1485010000 r-xp 00002000 08:01 7 /x/System.ComponentModel.EventBasedAsync.dll\n"
    )
    for opt, path, base in (
        ("--perfinfo", pi, 0x7F1484000000),
        ("--proc-maps", maps, 0x7F1485000000),
    ):
        out = tmp_path / "out.map"
        rc, _, err = run(capsys, "convert", str(R2R), opt, str(path), "-o", str(out))
        assert rc == 0, err
        assert read_perf_map(out.read_bytes()).starts[0] == base + 0x115D0
    rc, _, err = run(capsys, "convert", str(R2R), "-o", str(tmp_path / "x.map"))
    assert rc == 2 and "no load base" in err


def test_convert_refuses_to_overwrite_its_input(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    copy = tmp_path / "a.ni.r2rmap"
    shutil.copy(R2R, copy)
    rc, _, err = run(capsys, "convert", str(copy), "--base", "0x1000", "-o", str(copy))
    assert rc == 2 and "inputs are never modified" in err
    assert copy.read_bytes() == R2R.read_bytes()


TRANSCRIPT = """\
dotnet  4242 12345.678901:     250000 cpu-clock:
\t    7f1484580020 [unknown] (/tmp/perf-4242.map)
\t    {r2r:x} [unknown] (/x/System.ComponentModel.EventBasedAsync.dll)
\t    55d4c3a00010 main+0x10 (/usr/share/dotnet/dotnet)
\t    deadbeef [unknown] ([unknown])

dotnet  4242 12345.679901:     250000 cpu-clock:  {r2r2:x} [unknown] (/x/System.ComponentModel.EventBasedAsync.dll)
"""


def test_symbolize_transcript(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    text = TRANSCRIPT.format(r2r=BASE + 0x122F0 + 7, r2r2=BASE + 0x115D0)
    src = tmp_path / "script.txt"
    src.write_text(text)
    rc, out, err = run(
        capsys, "symbolize", str(src), "--map", str(DOTNET), "--map", str(R2R),
        "--base", hex(BASE), "--stats",
    )  # fmt: skip
    assert rc == 0
    want = (
        text.replace(
            "7f1484580020 [unknown]",
            "7f1484580020 stub<1> AllocateTemporaryEntryPoints<PRECODE_FIXUP>+0x8",
        )
        .replace(
            f"{BASE + 0x122F0 + 7:x} [unknown]",
            f"{BASE + 0x122F0 + 7:x} System.ComponentModel.BackgroundWorker::RunWorkerAsync(System.Object)+0x7",
        )
        .replace(
            f"{BASE + 0x115D0:x} [unknown]",
            f"{BASE + 0x115D0:x} Microsoft.CodeAnalysis.EmbeddedAttribute::.ctor()+0x0",
        )
    )
    assert out == want
    assert "3 of 4 [unknown] frames named" in err
    dest = tmp_path / "named.txt"
    rc, out, _ = run(
        capsys, "symbolize", str(src), "--map", str(DOTNET), "--map", str(R2R),
        "--base", hex(BASE), "--no-offset", "-o", str(dest),
    )  # fmt: skip
    assert out == "" and "RunWorkerAsync(System.Object) (/x/" in dest.read_text()


def test_symbolize_stdin_is_a_byte_exact_filter() -> None:
    data = b"x 7f1484580020 [unknown] (\xff\xfe)\n\tno frames here [unknown]\n"
    proc = subprocess.run(
        [sys.executable, "-m", "profkit", "perfmap", "symbolize", "--map", str(DOTNET)],
        input=data, capture_output=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == data.replace(
        b"7f1484580020 [unknown]",
        b"7f1484580020 stub<1> AllocateTemporaryEntryPoints<PRECODE_FIXUP>+0x8",
    )


def test_verify_exit_codes(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    rc, out, _ = run(capsys, "verify", str(DLL), str(DLL_MAP))
    assert rc == 0 and "OK" in out
    rc, out, _ = run(capsys, "verify", str(DLL), str(R2R))
    assert rc == 1 and "MISMATCH" in out
    rc, out, err = run(capsys, "verify", str(R2R), str(DLL_MAP))
    assert (rc, out) == (2, "") and "not a PE image" in err


BAD_FILES = [
    ("truncated.map", b"7f00 10 ok\n7f10 10\n", "line 2: truncated"),
    ("garbage.map", b"7f00 10 ok\n7fzz 10 x\n", "line 2: malformed"),
    ("huge.map", b"7f00 10 ok\n" + b"1" * 17 + b" 10 x\n", "line 2: too large"),
    ("bad.ni.r2rmap", b"FFFFFFFF 00 00\n000115E0 3F \xff\xfe\n", "line 2: malformed"),
    ("huge.ni.r2rmap", b"FFFFFFFF 00 00\n1000115E0 3F x\n", "line 2: too large"),
]


@pytest.mark.parametrize(("name", "data", "words"), BAD_FILES)
@pytest.mark.parametrize("action", ["show", "lookup", "symbolize", "convert"])
def test_bad_input_one_line_exit_2(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    name: str,
    data: bytes,
    words: str,
    action: str,
) -> None:
    path = tmp_path / name
    path.write_bytes(data)
    script = tmp_path / "script.txt"
    script.write_text("x 7f00 [unknown] (y)\n")
    if action == "convert" and not name.endswith(".r2rmap"):
        pytest.skip("convert reads r2rmaps only")
    argv = {
        "show": ["show", str(path)],
        "lookup": ["lookup", str(path), "0x7f00"],
        "symbolize": ["symbolize", str(script), "--map", str(path), "--base", "0x1000"],
        "convert": ["convert", str(path), "--base", "0x1000", "-o", str(tmp_path / "o.map")],
    }[action]
    rc, out, err = run(capsys, *argv)
    assert (rc, out) == (2, "")
    assert err.startswith(f"profkit: error: {path}: {words}")
    assert err.count("\n") == 1
    assert not (tmp_path / "o.map").exists()


def test_bad_perfinfo_and_missing_files(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    pi = tmp_path / "perfinfo-3.map"
    pi.write_bytes(
        b"ImageLoad;/a.dll;{2C3F4D7E-1A2B-4C5D-8E9F-0A1B2C3D4E5F};0;\nImageLoad;/b.dll;zz;0;\n"
    )
    rc, out, err = run(capsys, "show", str(pi))
    assert (rc, out) == (2, "") and f"{pi}: line 2: malformed" in err
    rc, out, err = run(
        capsys, "convert", str(R2R), "--perfinfo", str(pi), "-o", str(tmp_path / "o")
    )
    assert (rc, out) == (2, "") and f"{pi}: line 2: malformed" in err
    missing = tmp_path / "nope.map"
    for argv in (["show", str(missing)], ["symbolize", str(missing), "--map", str(DOTNET)]):
        rc, out, err = run(capsys, *argv)
        assert (rc, out) == (2, "") and err.count("\n") == 1 and "no such file" in err


def test_bad_input_real_process(tmp_path: Path) -> None:
    path = tmp_path / "perf-1.map"
    path.write_bytes(b"7f00 10 ok\n\xff\xfe 10 x\n")
    proc = subprocess.run(
        [sys.executable, "-m", "profkit", "perfmap", "show", str(path)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "line 2: malformed" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_lenient_skips_with_a_warning(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "perf-1.map"
    path.write_bytes(b"7f00 10 ok\ngarbage\n7f20 10 fine\n")
    rc, out, err = run(capsys, "lookup", str(path), "7f25", "--lenient")
    assert rc == 0 and out == "0x7f25 fine+0x5\n"
    assert "skipped 1 malformed line(s); first: line 2" in err


def test_verify_image_without_perfmap_entry(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from profkit.formats.perfmap.pe import read_pe

    data = bytearray(DLL.read_bytes())
    image = read_pe(bytes(data))
    rva, size = image.directories[6]
    type_at = image.rva_to_offset(rva, size, "debug") + 12  # IMAGE_DEBUG_DIRECTORY.Type
    assert data[type_at] == 21
    data[type_at] = 2
    plain = tmp_path / "Plain.dll"
    plain.write_bytes(bytes(data))
    rc, out, err = run(capsys, "verify", str(plain), str(DLL_MAP))
    assert (rc, out) == (2, "")
    assert "no R2R PerfMap debug entry (type 21)" in err and err.count("\n") == 1


def test_symbolize_with_bases_from_mmap_events(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    text = (
        "python 7 1.0: PERF_RECORD_MMAP2 7/7: [0x7f1f869e3000(0x1000) @ 0x1000 fe:00 1 0]: "
        "r-xp /gone/MinimalR2R.dll\n"
        "python 7 1.1:     250000 cpu-clock:      7f1f869e3255 [unknown] (/gone/MinimalR2R.dll)\n"
    )
    src = tmp_path / "s.txt"
    src.write_text(text)
    rc, out, err = run(
        capsys, "symbolize", str(src), "--map", str(DLL_MAP), "--mmap-events", str(src),
        "--image-dir", str(FIX),
    )  # fmt: skip
    assert rc == 0, err
    assert out == text.replace(
        "7f1f869e3255 [unknown]",
        "7f1f869e3255 System.Int32 MinimalR2R.Program::Main(System.String[])+0x5",
    )
    rc, out, err = run(
        capsys, "symbolize", str(src), "--map", str(DLL_MAP), "--mmap-events", str(src)
    )
    assert (rc, out) == (2, "") and "no load base for image 'minimalr2r'" in err


def test_lookup_base_past_64_bits_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    """Was an internal error (ValueError from the Symbolizer)."""
    rc, out, err = run(capsys, "lookup", str(R2R), "10", "--base", "0xffffffffffffffff")
    assert rc == 2 and out == ""
    assert err.startswith("profkit: error: ") and "64-bit" in err and err.count("\n") == 1


def test_symbolize_refuses_to_overwrite_an_input(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    script = tmp_path / "s.txt"
    script.write_text("x 1 1.0: 1 cpu-clock:\n\t deadbeef [unknown] ([unknown])\n")
    before = script.read_bytes()
    rc, _, err = run(
        capsys, "symbolize", str(script), "--map", str(R2R), "--base", "0x1000", "-o", str(script)
    )
    assert rc == 2 and "inputs are never modified" in err
    assert script.read_bytes() == before


def test_convert_through_a_symlink_and_to_a_device(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A rename over ``-o /dev/full`` (as root) replaced the device with a regular file."""
    real = tmp_path / "perf-1.map"
    real.write_bytes(b"")
    link = tmp_path / "link.map"
    link.symlink_to(real.name)
    rc, _, _ = run(capsys, "convert", str(R2R), "--base", "0x1000", "-o", str(link))
    assert rc == 0 and link.is_symlink() and real.stat().st_size > 0
    if os.path.exists("/dev/null") and stat.S_ISCHR(os.stat("/dev/null").st_mode):
        rc, _, _ = run(capsys, "convert", str(R2R), "--base", "0x1000", "-o", "/dev/null")
        assert rc == 0 and stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_stdout_write_error_is_one_line() -> None:
    """``convert -o - > /dev/full`` exited 0 having written nothing."""
    if not os.path.exists("/dev/full") or not stat.S_ISCHR(os.stat("/dev/full").st_mode):
        pytest.skip("no /dev/full")
    for argv in (["convert", str(R2R), "--base", "0x1000", "-o", "-"], ["show", str(R2R)]):
        with open("/dev/full", "wb") as full:
            proc = subprocess.run(
                [sys.executable, "-m", "profkit", "perfmap", *argv],
                stdout=full,
                stderr=subprocess.PIPE,
                text=True,
                timeout=60,
            )
        assert proc.returncode == 2
        assert proc.stderr.endswith(
            "profkit: error: cannot write to stdout: No space left on device\n"
        )
        assert proc.stderr.count("profkit: error:") == 1


def test_append_into_a_fifo_writes_instead_of_blocking(tmp_path: Path) -> None:
    """``--append -o FIFO`` (or ``/dev/stdout`` on a terminal) first read the output to
    keep its lines, which blocks forever on a FIFO; only regular files are read now."""
    import threading

    fifo = tmp_path / "perf-1.map"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "profkit",
            "perfmap",
            "convert",
            str(R2R),
            "--base",
            "0x1000",
            "--append",
            "-o",
            str(fifo),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    reader.join(30)
    assert proc.returncode == 0, proc.stderr
    assert got and got[0].count(b"\n") == 71
