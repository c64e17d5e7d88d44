"""`profkit perfmap from-image`, `verify` without a type-21 entry, and `symbolize` building
maps from the R2R images a profile names (perfinfo, DSO paths), on real CoreCLR images."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from profkit.cli.main import main
from profkit.formats.perfmap.r2rmap import read_r2rmap, write_r2rmap
from profkit.formats.r2r import load_r2r_image
from tests.formats.r2r.conftest import runtime_dir

CONCAT = "System.String System.String::Concat(System.String, System.String)"


@pytest.fixture(scope="module")
def framework() -> Path:
    found = runtime_dir()
    if found is None:
        pytest.skip("dotnetcore2 (CoreCLR 3.1 with R2R framework images) is not installed")
    return found


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(["perfmap", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_from_image_then_verify(
    capsys: pytest.CaptureFixture[str], framework: Path, tmp_path: Path
) -> None:
    image = framework / "System.Linq.dll"
    out = tmp_path / "System.Linq.ni.r2rmap"
    rc, stdout, err = run(capsys, "from-image", str(image), "-o", str(out))
    assert (rc, stdout) == (0, "") and "method entries" in err
    data = out.read_bytes()
    assert data.startswith(b"FFFFFFFF 00 ") and data.endswith(b"\n")
    assert write_r2rmap(read_r2rmap(data)) == data  # byte-exact round trip
    rc, stdout, _ = run(capsys, "verify", str(image), str(out))
    assert rc == 0 and "OK: the map belongs to the image" in stdout
    rc, stdout, _ = run(capsys, "verify", str(framework / "System.Console.dll"), str(out))
    assert rc == 1 and "MISMATCH" in stdout


def test_from_image_stdout(capsys: pytest.CaptureFixture[str], framework: Path) -> None:
    rc, stdout, _ = run(capsys, "from-image", str(framework / "System.Runtime.dll"), "-o", "-")
    assert rc == 0 and stdout.splitlines()[1] == "FFFFFFFE 00 1"


def test_from_image_il_only(
    capsys: pytest.CaptureFixture[str], framework: Path, tmp_path: Path
) -> None:
    out = tmp_path / "m.ni.r2rmap"
    rc, stdout, err = run(capsys, "from-image", str(framework / "mscorlib.dll"), "-o", str(out))
    assert (rc, stdout) == (2, "")
    assert "not a ReadyToRun image" in err and err.count("\n") == 1
    assert not out.exists()


@functools.cache
def _corelib_frames(framework: Path) -> tuple[str, int, int, int]:
    """(path, RVA of String.Concat(string, string), its file offset, a load base)."""
    path = str(framework / "System.Private.CoreLib.dll")
    image = load_r2r_image(path)
    body = next(m for m in image.methods() if m.name == CONCAT)
    return path, body.rva, image.pe.rva_to_offset(body.rva, 1, "t"), 0x7F0012340000


def test_symbolize_builds_image_maps(
    capsys: pytest.CaptureFixture[str],
    framework: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """perf -g callchains print DSO-relative addresses (file offsets); sample lines print
    absolute IPs: both are named, with no map given, from the image itself."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    path, rva, offset, base = _corelib_frames(framework)
    perfinfo = tmp_path / "perfinfo-7.map"
    perfinfo.write_text(f"ImageLoad;{path};{{82d8e023-e6b4-4028-a9dc-44dee6b6a537}};{base:016X};\n")
    script = tmp_path / "s.txt"
    script.write_text(
        "dotnet 7 1.0: 1 cpu-clock:\n"
        f"\t    {offset + 5:x} [unknown] ({path})\n"
        f"\t    {base + rva + 6:x} [unknown] ({path})\n"
        "\t    1234 [unknown] (/nonexistent/x.so)\n"
    )
    rc, out, err = run(capsys, "symbolize", str(script), "--perfinfo", str(perfinfo), "--stats")
    assert rc == 0
    assert f"{offset + 5:x} {CONCAT}+0x5 ({path})" in out
    assert f"{base + rva + 6:x} {CONCAT}+0x6 ({path})" in out
    assert "1234 [unknown] (/nonexistent/x.so)" in out
    assert "2 of 3 [unknown] frames named" in err
    assert (
        f"0 of 2 still unknown in {path}" in err and "1 of 1 still unknown in /nonexistent" in err
    )
    cached = list((tmp_path / "cache" / "profkit" / "r2r").glob("*.ni.r2rmap"))
    assert cached  # built once, then reused
    # without perfinfo the DSO path alone is enough for the DSO-relative frame
    rc, out, _ = run(capsys, "symbolize", str(script))
    assert rc == 0 and f"{offset + 5:x} {CONCAT}+0x5" in out
    assert f"{base + rva + 6:x} [unknown]" in out  # an absolute IP needs the base
    rc, out, _ = run(capsys, "symbolize", str(script), "--no-image-maps", "--perfinfo",
                     str(perfinfo))  # fmt: skip
    assert rc == 0 and out == script.read_text()


def test_symbolize_cache_is_rebuilt_when_damaged(
    capsys: pytest.CaptureFixture[str],
    framework: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path, _, offset, _ = _corelib_frames(framework)
    script = tmp_path / "s.txt"
    script.write_text(f"x 1 1.0: 1 cpu-clock:\n\t    {offset:x} [unknown] ({path})\n")
    cache = tmp_path / "c"
    rc, first, _ = run(capsys, "symbolize", str(script), "--cache-dir", str(cache))
    (entry,) = cache.glob("*.ni.r2rmap")
    entry.write_bytes(b"FFFFFFFF 00 00000000000000000000000000000000\n00001000 10 wrong\n")
    rc2, second, _ = run(capsys, "symbolize", str(script), "--cache-dir", str(cache))
    assert rc == rc2 == 0 and first == second and CONCAT in first


def test_symbolize_image_at_several_bases(
    capsys: pytest.CaptureFixture[str],
    framework: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two processes, two bases: absolute IPs are ambiguous (warned), DSO-relative ones not."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    path, rva, offset, base = _corelib_frames(framework)
    infos = []
    for pid, b in ((7, base), (8, base + 0x10000000)):
        info = tmp_path / f"perfinfo-{pid}.map"
        info.write_text(f"ImageLoad;{path};{{82d8e023-e6b4-4028-a9dc-44dee6b6a537}};{b:016X};\n")
        infos += ["--perfinfo", str(info)]
    script = tmp_path / "s.txt"
    script.write_text(
        f"x 7 1.0: 1 cpu-clock:\n\t    {offset:x} [unknown] ({path})\n"
        f"\t    {base + rva:x} [unknown] ({path})\n"
    )
    rc, out, err = run(capsys, "symbolize", str(script), *infos)
    assert rc == 0 and "loaded at several bases" in err and err.count("\n") == 1
    assert f"{offset:x} {CONCAT}+0x0" in out and f"{base + rva:x} [unknown]" in out


def test_show_on_an_r2r_image(capsys: pytest.CaptureFixture[str], framework: Path) -> None:
    rc, out, _ = run(capsys, "show", str(framework / "System.Linq.dll"), "--json")
    import json

    info = json.loads(out)["readytorun"]
    assert rc == 0 and info["version"] == "3.1" and info["target"] == "X64/Linux"
    assert info["components"] == ["System.Linq"] and info["method_bodies"] > 900
    rc, out, _ = run(capsys, "show", str(framework / "mscorlib.dll"), "--json")
    assert rc == 0 and json.loads(out)["readytorun"] is None


def test_symbolize_damaged_image(
    capsys: pytest.CaptureFixture[str], framework: Path, tmp_path: Path
) -> None:
    """A damaged image a frame names: one error line, exit 2; --lenient: one warning."""
    data = (framework / "System.Linq.dll").read_bytes()
    bad = tmp_path / "System.Linq.dll"
    bad.write_bytes(data[: len(data) // 2])
    script = tmp_path / "s.txt"
    script.write_text(f"x 1 1.0: 1 cpu-clock:\n\t    1234 [unknown] ({bad})\n")
    rc, out, err = run(capsys, "symbolize", str(script), "--no-cache")
    assert (rc, out) == (2, "") and err.count("\n") == 1 and str(bad) in err and "offset" in err
    rc, out, err = run(capsys, "symbolize", str(script), "--no-cache", "--lenient")
    assert rc == 0 and out == script.read_text()
    assert err.count("\n") == 1 and "warning" in err and "stay unknown" in err
