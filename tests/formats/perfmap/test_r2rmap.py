"""R2R perf map v1: the real crossgen2 sample, header decoding, variants, round trips."""

from __future__ import annotations

import uuid

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from profkit.errors import PerfMapFormatError
from profkit.formats.perfmap._lines import CROSSGEN1_STYLE, CROSSGEN2_STYLE, LineStyle
from profkit.formats.perfmap.r2rmap import (
    HeaderRecord,
    PerfMapArchitecture,
    R2RHeader,
    R2RPerfMap,
    load_r2rmap,
    looks_like_r2rmap,
    parse_r2rmap_file_name,
    r2rmap_file_name,
    read_r2rmap,
    save_r2rmap,
    token_name,
    write_r2rmap,
)

from .conftest import R2RMAP_SAMPLE


def test_real_sample_round_trips_byte_exact(r2rmap_bytes: bytes) -> None:
    m = read_r2rmap(r2rmap_bytes)
    assert write_r2rmap(m) == r2rmap_bytes
    assert m.style == CROSSGEN2_STYLE


def test_real_sample_header_values(r2rmap_bytes: bytes) -> None:
    h = read_r2rmap(r2rmap_bytes).header
    assert h.signature == bytes.fromhex("734D59D6DE0E96AA3C77B3E2ED498097")
    assert (h.version, h.os, h.architecture, h.abi) == (1, 2, 3, 1)
    d = h.describe()
    assert (d["os_name"], d["architecture_name"], d["abi_name"]) == ("Linux", "X64", "Default")
    assert h.is_symstore_valid


def test_real_sample_entries(r2rmap_bytes: bytes) -> None:
    m = read_r2rmap(r2rmap_bytes)
    assert len(m) == 71  # spec §5: 71 method lines
    first = next(m.entries())
    assert first == (0x115D0, 0x0D, "Microsoft.CodeAnalysis.EmbeddedAttribute::.ctor()")
    by_name = {e.name: e for e in m.entries()}
    # a length wider than two hex digits, and a name with spaces
    e = by_name["System.ComponentModel.BackgroundWorker::RunWorkerAsync(System.Object)"]
    assert (e.rva, e.length) == (0x122F0, 0x11A)
    assert "System.String System.SR::GetResourceString(System.String)" in by_name


def test_load_and_save(tmp_path, r2rmap_bytes: bytes) -> None:
    m = load_r2rmap(str(R2RMAP_SAMPLE))
    out = tmp_path / "copy.ni.r2rmap"
    save_r2rmap(m, str(out))
    assert out.read_bytes() == r2rmap_bytes
    assert [p.name for p in tmp_path.iterdir()] == ["copy.ni.r2rmap"]  # no temp left


def test_crlf_map_round_trips(r2rmap_bytes: bytes) -> None:
    crlf = r2rmap_bytes.replace(b"\n", b"\r\n")  # crossgen2 run on Windows (spec §1.3)
    m = read_r2rmap(crlf)
    assert m.names == read_r2rmap(r2rmap_bytes).names
    assert m.style.newline == "\r\n"
    assert write_r2rmap(m) == crlf


def test_unknown_tokens_and_newer_architectures_are_kept() -> None:
    data = (
        b"FFFFFFFF 00 000102030405060708090A0B0C0D0E0F\n"
        b"FFFFFFFE 00 1\nFFFFFFFD 00 42\nFFFFFFFC 00 5\nFFFFFFFB 00 1\n"
        b"FFFFFFFA 00 something new\n"
        b"00001000 10 A::B()\n"
    )
    m = read_r2rmap(data)
    assert m.header.os == 42 and token_name(type(PerfMapArchitecture.X64), 42) == "unknown(42)"
    assert m.header.describe()["os_name"] == "unknown(42)"
    assert m.header.describe()["architecture_name"] == "RiscV64"
    assert m.header.records[5] == HeaderRecord(0xFFFFFFFA, 0, "something new")
    assert write_r2rmap(m) == data
    six = data.replace(b"FFFFFFFC 00 5", b"FFFFFFFC 00 6")
    assert read_r2rmap(six).header.describe()["architecture_name"] == "LoongArch64"


def test_preview_header_spelling_is_kept_not_rejected() -> None:
    # .NET 6 preview writer: GUID text signature, enum names (spec §1.11 item 2)
    data = (
        b"FFFFFFFF 00 99d3f272-c6a8-429b-a694-647a7912d178\n"
        b"FFFFFFFE 00 Linux\nFFFFFFFD 00 X64\nFFFFFFFC 00 1\n"
        b"000115D0 0D A::B()\n"
    )
    m = read_r2rmap(data)
    assert m.header.signature is None and m.header.version is None
    assert not m.header.is_symstore_valid
    assert write_r2rmap(m) == data


def test_crossgen1_headerless_lowercase_map() -> None:
    data = (
        b"00028450 147 void [test] PerfViewTierEventsTest::Main()[ReadyToRun]\n00028600 1a x::y\n"
    )
    m = read_r2rmap(data)
    assert m.header.records == ()
    assert m.style == CROSSGEN1_STYLE
    assert write_r2rmap(m) == data


def test_duplicate_names_for_hot_and_cold_parts() -> None:
    data = b"00001000 10 A::B()\n00001010 08 C::D()\n00009000 20 A::B()\n"
    m = read_r2rmap(data)
    assert [e.name for e in m.entries()].count("A::B()") == 2
    assert write_r2rmap(m) == data


def test_long_length_field() -> None:
    m = read_r2rmap(b"00001000 12345 big\n")
    assert m.lengths.tolist() == [0x12345]


def test_late_header_record_is_an_error_or_skipped() -> None:
    data = b"00001000 10 A\nFFFFFFFD 00 2\n"
    with pytest.raises(PerfMapFormatError) as info:
        read_r2rmap(data, path="x.ni.r2rmap")
    assert info.value.line == 2
    m = read_r2rmap(data, strict=False)
    assert len(m) == 1 and m.skipped == [(2, "late header record")]


def test_header_build_matches_crossgen2(r2rmap_bytes: bytes) -> None:
    h = R2RHeader.build(
        bytes.fromhex("734D59D6DE0E96AA3C77B3E2ED498097"), os=2, architecture=3, abi=1
    )
    real = read_r2rmap(r2rmap_bytes)
    assert h == real.header
    fresh = R2RPerfMap.from_entries(h, list(real.entries()))
    assert write_r2rmap(fresh) == r2rmap_bytes


def test_file_names() -> None:
    assert parse_r2rmap_file_name("/x/System.Private.CoreLib.ni.r2rmap") == (
        "System.Private.CoreLib",
        1,
        None,
        False,
    )
    mvid = uuid.UUID("99d3f272-c6a8-429b-a694-647a7912d178")
    v0 = r2rmap_file_name("Foo", version=0, mvid=mvid)
    assert v0 == "Foo.ni.{99d3f272-c6a8-429b-a694-647a7912d178}.map"
    assert parse_r2rmap_file_name(v0) == ("Foo", 0, mvid, False)
    assert parse_r2rmap_file_name("framework-r2r.ni.{composite}.map") == (
        "framework-r2r",
        0,
        None,
        True,
    )
    assert parse_r2rmap_file_name("perf-123.map") is None
    assert looks_like_r2rmap(b"FFFFFFFF 00 00", "whatever")
    assert not looks_like_r2rmap(b"7f00 10 x", "perf-1.map")


# -- property tests ---------------------------------------------------------------------

_name = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\n"), min_size=1
).filter(lambda s: not s.endswith("\r"))
_entries = st.lists(
    st.tuples(st.integers(0, 0xFFFFFFEF), st.integers(0, 0xFFFFFFFF), _name), max_size=30
)
_styles = st.builds(
    LineStyle,
    address_upper=st.booleans(),
    size_upper=st.booleans(),
    address_width=st.integers(0, 10),
    size_width=st.integers(0, 4),
    separator=st.sampled_from([" ", "\t"]),
    newline=st.sampled_from(["\n", "\r\n"]),
    final_newline=st.booleans(),
)


@settings(max_examples=150, deadline=None)
@given(
    sig=st.binary(min_size=16, max_size=16),
    os=st.integers(0, 2**32 - 1),
    arch=st.integers(0, 2**32 - 1),
    abi=st.integers(0, 2**32 - 1),
    entries=_entries,
)
def test_round_trip_property(sig: bytes, os: int, arch: int, abi: int, entries: list) -> None:
    header = R2RHeader.build(sig, os=os, architecture=arch, abi=abi)
    m = R2RPerfMap.from_entries(header, entries)
    data = write_r2rmap(m)
    back = read_r2rmap(data)
    assert back.header == header
    assert back.header.signature == sig and back.header.os == os
    assert list(back.entries()) == [tuple(e) for e in entries]
    assert write_r2rmap(back) == data


@settings(max_examples=150, deadline=None)
@given(entries=_entries, style=_styles)
def test_round_trip_any_style(entries: list, style: LineStyle) -> None:
    m = R2RPerfMap(
        R2RHeader(),
        np.array([e[0] for e in entries], dtype=np.uint64),
        np.array([e[1] for e in entries], dtype=np.uint64),
        [e[2] for e in entries],
        style,
    )
    data = write_r2rmap(m)
    back = read_r2rmap(data)
    assert list(back.entries()) == [tuple(e) for e in entries]
    assert write_r2rmap(back) == data


def test_undetermined_style_settles_on_crossgen2(r2rmap_bytes: bytes) -> None:
    head = b"".join(r2rmap_bytes.splitlines(keepends=True)[:5])
    m = read_r2rmap(head)
    assert m.style == CROSSGEN2_STYLE  # "00" sizes show no case, no padding beyond 2
    grown = R2RPerfMap.from_entries(m.header, [(0x1A0, 0xB, "A::B()")])
    grown.style = m.style
    assert write_r2rmap(grown).endswith(b"000001A0 0B A::B()\n")
