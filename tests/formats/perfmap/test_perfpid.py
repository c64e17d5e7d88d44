"""perf-PID.map: every writer style in the wild, perf's quirks, round trips."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from profkit.formats.perfmap._lines import (
    CPYTHON_STYLE,
    DOTNET8_STYLE,
    DOTNET_PAL_STYLE,
    LineStyle,
)
from profkit.formats.perfmap.perfpid import (
    PerfMap,
    load_perf_map,
    read_perf_map,
    save_perf_map,
    write_perf_map,
)

from .conftest import DOTNET_MAP_SAMPLE


def test_real_dotnet_map_round_trips(dotnet_map_bytes: bytes) -> None:
    m = read_perf_map(dotnet_map_bytes)
    assert len(m) == 2435  # spec §5
    assert m.style == DOTNET_PAL_STYLE
    assert write_perf_map(m) == dotnet_map_bytes
    first = next(m.entries())
    assert first == (0x7F1484580018, 0x48, "stub<1> AllocateTemporaryEntryPoints<PRECODE_FIXUP>")
    assert m.writer_guess().startswith(".NET runtime before .NET 8")


def test_load_save(tmp_path, dotnet_map_bytes: bytes) -> None:
    m = load_perf_map(str(DOTNET_MAP_SAMPLE))
    out = tmp_path / "perf-1.map"
    save_perf_map(m, str(out))
    assert out.read_bytes() == dotnet_map_bytes


def test_dotnet8_0x_style() -> None:
    data = (
        b"0x7fb99c69d090 1b0 int32 [System.Private.CoreLib] System.SpanHelpers::IndexOf"
        b"(char&,char,int32)[OptimizedTier1]\n0x7fb99c69d300 48 stub<1> X<Y>\n"
    )
    m = read_perf_map(data)
    assert m.style == DOTNET8_STYLE
    assert m.starts.tolist() == [0x7FB99C69D090, 0x7FB99C69D300]
    assert write_perf_map(m) == data
    assert m.writer_guess().startswith(".NET 8+")


def test_cpython_style() -> None:
    data = b"7fec82b727e8 b py::Shape.area:/x/demo.py\n7fec82b72000 b py::<module>:<string>\n"
    m = read_perf_map(data)
    assert m.style == CPYTHON_STYLE
    assert m.sizes.tolist() == [11, 11]
    assert write_perf_map(m) == data
    assert m.writer_guess() == "CPython -X perf"


def test_perf_tolerances() -> None:
    # spec §2.3: all of these resolve in perf 6.1
    data = (
        b"0x7f2a9f460100 40 a0x\n"
        b"7f2a9f460300 0x40 size0x\n"
        b"7f2a9f460400\t40\ttabs\n"
        b" 7f2a9f460500  40 lead-and-two\n"
        b"7f2a9f460600 40  two-before-name\n"
        b"7F2A9F460700 4A MixedCase\n"
    )
    m = read_perf_map(data)
    assert m.starts.tolist()[:2] == [0x7F2A9F460100, 0x7F2A9F460300]
    assert m.names[4] == " two-before-name"  # perf keeps the extra blank too
    assert m.sizes.tolist()[5] == 0x4A


def test_crlf_is_stripped_unlike_perf() -> None:
    m = read_perf_map(b"7f00 10 name\r\n7f10 10 other\r\n")
    assert m.names == ["name", "other"]
    assert write_perf_map(m) == b"7f00 10 name\r\n7f10 10 other\r\n"


def test_non_utf8_names_round_trip() -> None:
    data = b"7f00 10 caf\xe9\xff name\n7f10 10 nul\x00inside\n"
    m = read_perf_map(data)
    assert write_perf_map(m) == data
    assert m.names[0].encode("utf-8", "surrogateescape") == b"caf\xe9\xff name"


def test_unsorted_duplicates_and_no_final_newline_kept() -> None:
    data = b"7f20 10 b\n7f00 10 a\n7f00 10 a2"
    m = read_perf_map(data)
    assert m.names == ["b", "a", "a2"]
    assert not m.style.final_newline
    assert write_perf_map(m) == data


def test_empty_file() -> None:
    m = read_perf_map(b"")
    assert len(m) == 0 and write_perf_map(m) == b""


_name_bytes = st.binary(min_size=1, max_size=40).filter(
    lambda b: b"\n" not in b and not b.endswith(b"\r")
)
_styles = st.builds(
    LineStyle,
    prefix=st.sampled_from(["", "0x"]),
    address_upper=st.booleans(),
    size_upper=st.booleans(),
    address_width=st.sampled_from([0, 8, 12, 16]),
    size_width=st.integers(0, 3),
    separator=st.sampled_from([" ", "\t"]),
    newline=st.sampled_from(["\n", "\r\n"]),
    final_newline=st.booleans(),
)


@settings(max_examples=200, deadline=None)
@given(
    entries=st.lists(
        st.tuples(st.integers(0, 2**64 - 1), st.integers(0, 2**64 - 1), _name_bytes),
        max_size=30,
    ),
    style=_styles,
)
def test_round_trip_property(entries: list, style: LineStyle) -> None:
    items = [(a, s, n.decode("utf-8", "surrogateescape")) for a, s, n in entries]
    m = PerfMap.from_entries(items, style)
    data = write_perf_map(m)
    back = read_perf_map(data)
    assert list(back.entries()) == items
    assert write_perf_map(back) == data
    assert [n.encode("utf-8", "surrogateescape") for n in back.names] == [e[2] for e in entries]


@settings(max_examples=300, deadline=None)
@given(
    lines=st.lists(
        st.text(alphabet=" \t0xX1aF\rn\xe9", min_size=0, max_size=14), min_size=1, max_size=6
    ),
    final=st.booleans(),
)
def test_vector_path_agrees_with_regex_path(lines: list[str], final: bool) -> None:
    from profkit.formats.perfmap._fastparse import fast_parse
    from profkit.formats.perfmap._lines import _regex_parse

    data = ("\n".join(lines) + ("\n" if final else "")).encode()
    fast = fast_parse(data)
    if fast is None:
        return
    slow = _regex_parse(data.decode("utf-8", "surrogateescape"))
    assert slow is not None
    assert fast[0].tolist() == slow.starts.tolist()
    assert fast[1].tolist() == slow.sizes.tolist()
    assert fast[2] == slow.names
