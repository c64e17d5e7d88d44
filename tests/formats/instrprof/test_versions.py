"""The one indexed-version table (:mod:`profkit.formats.instrprof.versions`, issue #21 item 5).

Reader, writer, the version choice of ``compat`` and ``profdata merge``'s imitated release
all read it; these tests hold them to it. Before the table, ``profdata merge`` imitated
LLVM 14 for an indexed v8 file, while ``compat`` knew that LLVM 14 writes v7 (the
installed llvm-profdata-14 does) and that v8 is LLVM 15's.
"""

from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from profkit.formats.instrprof import versions
from profkit.formats.instrprof.compat import InputVersion, readable_version
from profkit.formats.instrprof.indexed import parse_indexed
from profkit.formats.instrprof.indexed_writer import LAYOUTS, build_indexed
from profkit.formats.instrprof.layouts import RAW_HEADER, RAW_RECORD, compile_layout
from profkit.formats.instrprof.model import FunctionRecord, Profile, ProfileKind
from tests.formats.instrprof.fixtures import ROOT

#: Spec §5.1: header bytes per version.
SPEC_HEADER_SIZE = {7: 40, 8: 48, 9: 56, 10: 64, 11: 64, 12: 72, 13: 72, 14: 72}


def _profile() -> Profile:
    return Profile(
        kind=ProfileKind.IR,
        records=[FunctionRecord("main", 0x10, [100, 1]), FunctionRecord("f", 7, [3])],
        binary_ids=[b"\x01\x02\x03"],
    )


@pytest.mark.parametrize("version", sorted(SPEC_HEADER_SIZE))
def test_header_size_is_the_specs(version: int) -> None:
    assert versions.header_size(version) == SPEC_HEADER_SIZE[version]


@pytest.mark.parametrize("version", sorted(LAYOUTS))
def test_writer_puts_each_header_field_where_the_table_says(version: int) -> None:
    data = build_indexed(_profile(), version)
    at = versions.header_offsets(version)
    word = struct.unpack_from("<Q", data, at["version"])[0]
    assert word & 0xFFFFFFFF == version
    assert struct.unpack_from("<QQ", data, versions.header_size(version)) == (6, 16)  # summary
    buckets, entries = struct.unpack_from(
        "<QQ", data, struct.unpack_from("<Q", data, at["hash_offset"])[0]
    )
    assert (buckets, entries) == (1, 2)
    if "binary_id_offset" in at:
        ids = struct.unpack_from("<Q", data, at["binary_id_offset"])[0]
        assert struct.unpack_from("<QQ", data, ids) == (16, 3)
    back = parse_indexed(data)
    assert back.version == version and back.binary_ids == (
        [b"\x01\x02\x03"] if version >= versions.BINARY_IDS_FROM else []
    )


def test_every_release_table_agrees() -> None:
    """compat's release table, the writer's versions and merge's imitated release."""
    for version in LAYOUTS:
        release = versions.merge_order_release(version)
        assert versions.INDEXED_BY_RELEASE[release] == version, (version, release)
    assert versions.merge_order_release(8) == 15  # was 14, which writes v7
    assert versions.written_by(7) == [12, 13, 14]
    for raw, (oldest, newest) in versions.RAW_RELEASES.items():
        assert versions.RELEASES[oldest][0] == versions.RELEASES[newest][0] == raw
    for release in versions.REPRODUCED_RELEASES:
        assert versions.INDEXED_BY_RELEASE[release] in LAYOUTS


def test_merge_imitates_the_release_that_writes_the_version() -> None:
    from profkit.cli.profdata_merge import LLVM_INDEXED_VERSION

    assert LLVM_INDEXED_VERSION == {14: 7, 16: 9, 19: 12, 22: 13}
    assert versions.merge_order_release(None) == 22
    assert [versions.merge_order_release(v) for v in range(7, 14)] == [14, 15, 16, 17, 18, 21, 22]


def test_compat_reads_the_same_table() -> None:
    choice = readable_version([InputVersion("raw", 8)], _profile())
    assert choice.version == versions.INDEXED_BY_RELEASE[14] == 7


@pytest.mark.skipif(shutil.which("llvm-profdata-14") is None, reason="no llvm-profdata-14")
def test_installed_llvm_14_writes_the_version_the_table_says(tmp_path: Path) -> None:
    text = ROOT / "clang14" / "fe.proftext"
    if not text.exists():
        pytest.skip("instrprof fixtures are absent")
    out = tmp_path / "out.profdata"
    subprocess.run(["llvm-profdata-14", "merge", str(text), "-o", str(out)], check=True)
    word = struct.unpack_from("<Q", out.read_bytes(), 8)[0]
    assert word & 0xFFFFFFFF == versions.INDEXED_BY_RELEASE[14]


@pytest.mark.parametrize("order", ["<", ">"])
@pytest.mark.parametrize("psize", [4, 8])
@pytest.mark.parametrize("version", sorted(RAW_RECORD))
def test_layout_offsets_are_where_struct_puts_each_field(
    order: str, psize: int, version: int
) -> None:
    """The byte offsets the raw merge's array path uses (once computed a second time)."""
    for fields in (RAW_RECORD[version], RAW_HEADER[version]):
        layout = compile_layout(fields, order, psize)
        values = list(range(1, len(layout.struct.unpack(bytes(layout.size))) + 1))
        data = layout.struct.pack(*values)
        sizes = {"Q": 8, "I": 4, "H": 2, "P": psize}
        codes = {8: "Q", 4: "I", 2: "H"}
        for spec in fields:
            name, kind = spec.split(":")
            width = sizes[kind[-1]]
            got = struct.unpack_from(order + codes[width], data, layout.offsets[name])[0]
            assert got == values[layout.pos(name)], (name, spec)
