"""Truncated, mutated and hostile R2R images: one FormatError with file and offset, or a
result; never another exception, a hang, or an allocation the file does not justify."""

from __future__ import annotations

import random
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from profkit.errors import FormatError
from profkit.formats.r2r import build_r2rmap, read_r2r_image
from profkit.formats.r2r.image import SECTION_INSTANCE_ENTRYPOINTS, SECTION_RUNTIME_FUNCTIONS
from profkit.formats.r2r.metadata import METHODDEF, NESTEDCLASS

KINDS = {"truncated", "malformed", "too_large", "bad_magic", "unsupported_version"}
SMALL = ["System.Runtime.CompilerServices.Unsafe.dll", "System.ComponentModel.dll"]


def _build(data: bytes) -> int:
    """Build the map; returns its length or raises FormatError."""
    return len(build_r2rmap(read_r2r_image(data, path="img.dll")))


def _expect_clean(data: bytes) -> None:
    try:
        _build(data)
    except FormatError as exc:
        assert exc.kind in KINDS
        assert exc.path == "img.dll" and exc.offset is not None
        assert "\n" not in str(exc)


@pytest.mark.parametrize("name", SMALL)
def test_truncated_at_every_offset(framework: Path, name: str) -> None:
    data = (framework / name).read_bytes()
    assert _build(data) > 0
    for cut in range(len(data)):
        _expect_clean(data[:cut])


def test_corelib_truncated(framework: Path) -> None:
    data = (framework / "System.Private.CoreLib.dll").read_bytes()
    rng = random.Random(14)
    cuts = list(range(0, 4096, 7)) + rng.sample(range(len(data)), 40)
    for cut in cuts:
        _expect_clean(data[:cut])


@pytest.mark.parametrize("name", SMALL)
def test_random_mutations(framework: Path, name: str) -> None:
    data = (framework / name).read_bytes()
    rng = random.Random(name)
    for _ in range(1500):
        b = bytearray(data)
        for _ in range(rng.choice([1, 2, 4, 8])):
            b[rng.randrange(len(b))] = rng.choice([0, 0xFF, 0x7F, 0x80, rng.randrange(256)])
        _expect_clean(bytes(b))


def _image(framework: Path, name: str) -> tuple[bytearray, object]:
    data = bytearray((framework / name).read_bytes())
    return data, read_r2r_image(bytes(data))


def test_huge_section_count(framework: Path) -> None:
    data, image = _image(framework, SMALL[0])
    cli = image.pe.directories[14][0]  # type: ignore[attr-defined]
    cli_off = image.pe.rva_to_offset(cli, 72, "cli")  # type: ignore[attr-defined]
    native_rva = struct.unpack_from("<I", data, cli_off + 64)[0]
    off = image.pe.rva_to_offset(native_rva, 16, "r2r")  # type: ignore[attr-defined]
    struct.pack_into("<I", data, off + 12, 0xFFFFFFFF)
    with pytest.raises(FormatError) as err:
        _build(bytes(data))
    assert err.value.kind == "too_large" and err.value.offset is not None


def test_runtime_function_out_of_range(framework: Path) -> None:
    data, image = _image(framework, SMALL[0])
    rva, _ = image.sections[SECTION_RUNTIME_FUNCTIONS]  # type: ignore[attr-defined]
    off = image.pe.rva_to_offset(rva, 12, "rf")  # type: ignore[attr-defined]
    struct.pack_into("<II", data, off, 0x7FFFFFF0, 0x7FFFFFFF)
    with pytest.raises(FormatError, match="outside every section") as err:
        _build(bytes(data))
    assert err.value.offset == off


def test_cyclic_instance_entry_buckets(framework: Path) -> None:
    data, image = _image(framework, SMALL[0])
    rva, size = image.sections[SECTION_INSTANCE_ENTRYPOINTS]  # type: ignore[attr-defined]
    off = image.pe.rva_to_offset(rva, size, "inst")  # type: ignore[attr-defined]
    header = data[off]
    entry = (1, 2, 4)[header & 3]
    n_buckets = 1 << (header >> 2)
    assert n_buckets >= 2
    fmt = {1: "<B", 2: "<H", 4: "<I"}[entry]
    # bucket 1 starts after bucket 2: a table that would revisit its own bytes
    end_of_all = struct.unpack_from(fmt, data, off + 1 + entry * n_buckets)[0]
    struct.pack_into(fmt, data, off + 1 + entry, end_of_all)
    struct.pack_into(fmt, data, off + 1 + 2 * entry, 0)
    with pytest.raises(FormatError, match="ascend"):
        _build(bytes(data))


def test_nested_class_cycle(framework: Path) -> None:
    data, image = _image(framework, "System.Private.CoreLib.dll")
    md = image.components[0].metadata  # type: ignore[attr-defined]
    table = md.tables[NESTEDCLASS]
    owner = md.method_owner(md.count(METHODDEF))
    last = table.offset + table.row_size * (len(table) - 1)
    width = table.row_size // 2
    fmt = "<HH" if width == 2 else "<II"
    struct.pack_into(fmt, data, last, owner, owner)  # the type encloses itself
    with pytest.raises(FormatError, match="NestedClass cycle"):
        _build(bytes(data))


def test_cli_one_line_exit_2(framework: Path, tmp_path: Path) -> None:
    data = (framework / SMALL[0]).read_bytes()
    bad = tmp_path / "cut.dll"
    bad.write_bytes(data[: len(data) // 2])
    out = tmp_path / "cut.ni.r2rmap"
    proc = subprocess.run(
        [sys.executable, "-m", "profkit", "perfmap", "from-image", str(bad), "-o", str(out)],
        capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and str(bad) in lines[0] and "offset 0x" in lines[0]
    assert not out.exists()
    assert bad.read_bytes() == data[: len(data) // 2]  # inputs are never modified


def test_self_referring_typespec_cannot_explode(framework: Path) -> None:
    """A TypeSpec whose two generic arguments are itself would double at every level:
    the depth limit stops the first path (a DAG of distinct TypeSpecs that stays shallow
    but fans out is stopped by the 4,096-type budget instead)."""
    from profkit.formats.r2r.metadata import TYPESPEC
    from profkit.formats.r2r.signatures import SigReader

    data, image = _image(framework, "System.Private.CoreLib.dll")
    md = image.components[0].metadata  # type: ignore[attr-defined]
    sigs = md.table(TYPESPEC).column("Signature")
    rid, pos = next(  # rid < 32: its coded token fits in one compressed byte
        (i + 1, md.blob(b)[0]) for i, b in enumerate(sigs[:31]) if md.blob(b)[1] >= 8
    )
    token = 0x12, (rid << 2) | 2  # CLASS <this TypeSpec>
    struct.pack_into("8B", data, pos, 0x15, 0x12, *[(rid << 2) | 2], 2, *token, *token)
    md2 = read_r2r_image(bytes(data)).components[0].metadata
    reader = SigReader(md2, 0, 0, data=md2.data, path="img.dll")
    with pytest.raises(FormatError) as err:
        reader.token_type((rid << 2) | 2, 0)
    assert err.value.kind == "malformed" and "nests deeper than" in str(err.value)


def test_fanning_out_typespecs_hit_the_budget(framework: Path) -> None:
    """14 distinct TypeSpecs, each instantiated with the next one twice: depth 14 only,
    but 2**14 types; the 4,096-type budget ends it with one error."""
    from profkit.formats.r2r.metadata import TYPESPEC
    from profkit.formats.r2r.signatures import SigReader

    data, image = _image(framework, "System.Private.CoreLib.dll")
    md = image.components[0].metadata  # type: ignore[attr-defined]
    sigs = md.table(TYPESPEC).column("Signature")
    # blobs of >= 10 bytes: GENERICINST CLASS <def> 2, then CLASS + a 2-byte token, twice
    chain = [(i + 1, md.blob(b)[0]) for i, b in enumerate(sigs[:4000]) if md.blob(b)[1] >= 10]
    assert len(chain) >= 14
    chain = chain[:14]
    for k, (_, pos) in enumerate(chain):
        if k + 1 < len(chain):
            coded = (chain[k + 1][0] << 2) | 2
            arg = (0x12, 0x80 | coded >> 8, coded & 0xFF)
        else:
            arg = (0x08, 0x08, 0x08)  # int32 (the other bytes are never read)
        struct.pack_into("10B", data, pos, 0x15, 0x12, 2 << 2, 2, *arg, *arg)
    md2 = read_r2r_image(bytes(data)).components[0].metadata
    reader = SigReader(md2, 0, 0, data=md2.data, path="img.dll")
    with pytest.raises(FormatError) as err:
        reader.token_type((chain[0][0] << 2) | 2, 0)
    assert err.value.kind == "too_large" and "expands to more than" in str(err.value)
