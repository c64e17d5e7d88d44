"""Issue #22 item 10: a damaged ``--binary-file`` / ``--debug-info`` executable gives one
``profkit: error:`` line naming the file (and the offset where known), exit 2; never a
traceback (exit 70), a hang or a huge allocation.

The reproductions: build-ID notes of another owner, notes running past their section,
``sh_offset``/``sh_size`` near 2⁶³, and the 20+ errors pyelftools raises on mutated
input (KeyError from an abbreviation table, AssertionError, OSError from a negative
seek, MemoryError...). The executable is a small C program built here by gcc with
``-g`` and a build ID, holding the three sections correlation reads, then truncated and
mutated (seeded); it is read through :func:`correlate` with a real correlation raw file.
"""

from __future__ import annotations

import random
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from profkit.errors import ProfileFormatError
from profkit.formats.instrprof.correlate import correlate
from profkit.formats.instrprof.elfread import ElfBinary
from tests.cli.test_profdata_merge import run

pytest.importorskip("elftools", reason="pyelftools is not installed")

RAW = Path(__file__).resolve().parents[2] / "fixtures/instrprof/clang22/ir_dbgcorrelate.profraw"

#: What clang -profile-correlate leaves in an executable, in gcc's spelling: the counter
#: section, the data records and names (binary mode), a ``__profc_`` variable in DWARF.
_SOURCE = r"""
__attribute__((section("__llvm_prf_cnts"), used)) unsigned long long __profc_main[2];
__attribute__((section("__llvm_covdata"), used)) unsigned long long covdata[6] = {1, 2, 3};
__attribute__((section("__llvm_covnames"), used)) char covnames[8] = "\x01\x00main";
int main(int argc, char **argv) { __profc_main[argc & 1]++; return 0; }
"""

_MODES = ("binary", "debug-info")


@pytest.fixture(scope="module")
def elf(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None:
        pytest.skip("no C compiler")
    tmp = tmp_path_factory.mktemp("elf")
    (tmp / "probe.c").write_text(_SOURCE)
    cmd = [gcc, "-g", "-O0", "-Wl,--build-id", "probe.c", "-o", "probe"]
    done = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        pytest.skip(f"gcc cannot build the probe: {done.stderr[:200]}")
    data = (tmp / "probe").read_bytes()
    if data[:5] != b"\x7fELF\x02" or data[5] != 1:
        pytest.skip("the probe is not a little-endian ELF64")
    return data


def _sections(data: bytes) -> list[tuple[int, str, int, int]]:
    """(header offset, name, sh_offset, sh_size) of each section of a little-endian ELF64."""
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    entsize, count, strndx = struct.unpack_from("<HHH", data, 0x3A)
    heads = [shoff + i * entsize for i in range(count)]
    str_off = struct.unpack_from("<Q", data, heads[strndx] + 0x18)[0]
    out = []
    for head in heads:
        name_at = str_off + struct.unpack_from("<I", data, head)[0]
        name = data[name_at : data.index(b"\0", name_at)].decode()
        offset, size = struct.unpack_from("<QQ", data, head + 0x18)
        out.append((head, name, offset, size))
    return out


def _section(data: bytes, name: str) -> tuple[int, int, int]:
    return next((h, o, s) for h, n, o, s in _sections(data) if n == name)


def _read(tmp: Path, data: bytes, mode: str) -> ProfileFormatError | None:
    path = tmp / "bin"
    path.write_bytes(data)
    try:
        correlate(RAW.read_bytes(), str(RAW), str(path), mode)
    except ProfileFormatError as exc:
        assert exc.path == str(path)
        assert "\n" not in str(exc)
        return exc
    return None


def test_the_probe_is_read(elf: bytes, tmp_path: Path) -> None:
    (tmp_path / "bin").write_bytes(elf)
    for mode in _MODES:
        binary = ElfBinary(str(tmp_path / "bin"), mode)
        assert binary.counters_size == 16 and len(binary.build_ids) == 1
    # correlate gets past the binary: it is refused as not the raw file's
    err = _read(tmp_path, elf, "debug-info")
    assert err is not None and err.kind == "incompatible"


def test_a_build_id_note_of_another_owner_is_not_a_build_id(elf: bytes, tmp_path: Path) -> None:
    _, offset, _ = _section(elf, ".note.gnu.build-id")
    data = bytearray(elf)
    assert data[offset + 12 : offset + 16] == b"GNU\0"
    data[offset + 12 : offset + 16] = b"XYZ\0"
    (tmp_path / "bin").write_bytes(data)
    assert ElfBinary(str(tmp_path / "bin"), "binary").build_ids == []


def test_a_note_running_past_its_section_names_its_offset(elf: bytes, tmp_path: Path) -> None:
    _, offset, _ = _section(elf, ".note.gnu.build-id")
    data = bytearray(elf)
    struct.pack_into("<I", data, offset + 4, 0xFFFF_FFF0)  # descsz
    err = _read(tmp_path, bytes(data), "binary")
    assert err is not None and err.kind == "malformed" and err.offset == offset
    assert "past its section" in str(err)


@pytest.mark.parametrize("field", [0x18, 0x20])  # sh_offset, sh_size
@pytest.mark.parametrize("name", ["__llvm_covdata", ".debug_info", ".note.gnu.build-id"])
def test_a_section_past_the_end_is_refused_before_it_is_read(
    elf: bytes, tmp_path: Path, name: str, field: int
) -> None:
    head, _, _ = _section(elf, name)
    for huge in (1 << 63, len(elf)):
        data = bytearray(elf)
        struct.pack_into("<Q", data, head + field, huge)
        for mode in _MODES:
            err = _read(tmp_path, bytes(data), mode)
            assert err is not None and err.kind == "truncated", err
            assert err.offset == head and "past the end of the file" in str(err)


def test_a_section_name_outside_its_table_is_refused_before_names_are_read(
    elf: bytes, tmp_path: Path
) -> None:
    """pyelftools reads a name 64 bytes at a time until a NUL: names pointing past the
    table (here into 1 MB without a NUL) were read to the end of the file, per section."""
    _, table_at, _ = _section(elf, ".shstrtab")
    data = bytearray(elf) + b"A" * (1 << 20)
    for head, _, _, _ in _sections(elf):
        struct.pack_into("<I", data, head, len(elf) - table_at)  # at the appended bytes
    for mode in _MODES:
        err = _read(tmp_path, bytes(data), mode)
        assert err is not None and err.kind == "malformed"
        assert "does not end inside the section-name table" in str(err)


def test_section_headers_past_the_end_are_refused(elf: bytes, tmp_path: Path) -> None:
    for at, fmt, value in ((0x28, "<Q", 1 << 62), (0x3C, "<H", 0xFFFF), (0x3A, "<H", 1)):
        data = bytearray(elf)
        struct.pack_into(fmt, data, at, value)
        for mode in _MODES:
            err = _read(tmp_path, bytes(data), mode)
            assert err is not None, (at, value)


def test_truncated_and_mutated_executables_give_one_format_error(
    elf: bytes, tmp_path: Path
) -> None:
    """Every truncation (in steps) and 150 seeded mutations, in both modes: a
    ProfileFormatError or a read, nothing else (before: exit 70 on 20+ error types)."""
    trials = [elf[:cut] for cut in range(0, len(elf), max(len(elf) // 120, 1))]
    rng = random.Random(22)
    for _ in range(150):
        data = bytearray(elf)
        for _ in range(rng.choice((1, 2, 4, 8))):
            pos = rng.randrange(len(data))
            value = rng.choice((0, 0xFF, 0x7F, 0x80, rng.randrange(256)))
            for j in range(rng.choice((1, 4, 8))):
                if pos + j < len(data):
                    data[pos + j] = value
        trials.append(bytes(data))
    for data in trials:
        for mode in _MODES:
            _read(tmp_path, data, mode)


def test_the_cli_prints_one_line_and_exits_2(elf: bytes, tmp_path: Path) -> None:
    head, _, _ = _section(elf, ".debug_abbrev")
    data = bytearray(elf)
    struct.pack_into("<Q", data, head + 0x18, 1 << 62)
    binary = tmp_path / "bin"
    binary.write_bytes(data)
    out = tmp_path / "out.profdata"
    for flag in ("--binary-file", "--debug-info"):
        rc, _, err = run(["profdata", "show", f"{flag}={binary}", str(RAW)])
        assert rc == 2, err
        (line,) = err.strip().splitlines()
        assert line.startswith(f"profkit: error: {binary}: offset 0x{head:x}: truncated:")
        # merge reports the input it could not merge (a warning naming the binary's
        # offset), then its one error line, as for any input that fails
        rc, _, err = run(["profdata", "merge", f"{flag}={binary}", "-o", str(out), str(RAW)])
        assert rc == 2, err
        assert all(line.startswith("profkit: ") for line in err.strip().splitlines())
        assert f"{binary}: offset 0x{head:x}: truncated:" in err
