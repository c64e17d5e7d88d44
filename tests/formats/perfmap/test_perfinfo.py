"""The .NET perfinfo-PID.map: ImageLoad lines in every rendering."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from profkit.errors import PerfMapFormatError
from profkit.formats.perfmap.perfinfo import (
    PerfInfo,
    PerfInfoRecord,
    read_perfinfo,
    write_perfinfo,
)

SAMPLE = (
    b"ImageLoad;/usr/share/dotnet/shared/Microsoft.NETCore.App/6.0.0/System.Private.CoreLib.dll;"
    b"{2C3F4D7E-1A2B-4C5D-8E9F-0A1B2C3D4E5F};00007F1486A10000;\n"
    b"ImageLoad;/app/my;odd;path.dll;{2c3f4d7e-1a2b-4c5d-8e9f-0a1b2c3d4e60};0x7fb99c000000;\n"
    b"ImageLoad;/app/App.dll;{2C3F4D7E-1A2B-4C5D-8E9F-0A1B2C3D4E61};0;\n"
    b"ImageLoad;/app/Lib.dll;{2c3f4d7e-1a2b-4c5d-8e9f-0a1b2c3d4e62};(nil);\n"
    b"ImageLoad;/old/Old.dll;{2C3F4D7E-1A2B-4C5D-8E9F-0A1B2C3D4E63};\n"
)


def test_parse_all_renderings() -> None:
    info = read_perfinfo(SAMPLE)
    recs = info.image_loads()
    assert [r.base for r in recs] == [0x7F1486A10000, 0x7FB99C000000, 0, 0, None]
    assert recs[1].path == "/app/my;odd;path.dll"  # ';' inside a path
    assert recs[0].mvid == uuid.UUID("2c3f4d7e-1a2b-4c5d-8e9f-0a1b2c3d4e5f")
    assert write_perfinfo(info) == SAMPLE


@pytest.mark.parametrize(
    ("line", "kind"),
    [
        (b"ImageLoad;/a.dll;{2C3F4D7E-1A2B-4C5D-8E9F-0A1B2C3D4E5F};00007F1486A10000", "malformed"),
        (b"ImageLoad;/a.dll;not-a-guid;0;", "malformed"),
        (b"ImageLoad;/a.dll;{2C3F4D7E-1A2B-4C5D-8E9F-0A1B2C3D4E5F};zz;", "malformed"),
        (
            b"ImageLoad;/a.dll;{2C3F4D7E-1A2B-4C5D-8E9F-0A1B2C3D4E5F};" + b"f" * 17 + b";",
            "too_large",
        ),
        (b"", "truncated"),
        (b"garbage", "malformed"),
    ],
)
def test_bad_lines(line: bytes, kind: str) -> None:
    data = SAMPLE + line + b"\n"
    with pytest.raises(PerfMapFormatError) as info:
        read_perfinfo(data, path="perfinfo-1.map")
    assert info.value.kind == kind and info.value.line == 6
    assert "perfinfo-1.map: line 6:" in str(info.value)
    assert len(read_perfinfo(data, strict=False).records) == 5


_path = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r"), min_size=1
)


@settings(max_examples=150, deadline=None)
@given(
    recs=st.lists(
        st.tuples(
            _path,
            st.uuids(),
            st.booleans(),
            st.one_of(
                st.none(),
                st.sampled_from(["0", "(nil)"]),
                st.integers(0, 2**64 - 1).map(lambda v: f"0x{v:x}"),
                st.integers(0, 2**64 - 1).map(lambda v: f"{v:016X}"),
            ),
        ),
        max_size=10,
    )
)
def test_round_trip_property(recs: list) -> None:
    info = PerfInfo(
        [
            PerfInfoRecord("ImageLoad", p, "{" + (str(u).upper() if up else str(u)) + "}", b)
            for p, u, up, b in recs
        ]
    )
    data = write_perfinfo(info)
    back = read_perfinfo(data)
    assert back.records == info.records
    assert write_perfinfo(back) == data


def test_every_truncation_and_mutation() -> None:
    import random

    for cut in range(len(SAMPLE) + 1):
        try:
            read_perfinfo(SAMPLE[:cut], path="cut")
        except PerfMapFormatError as err:
            assert err.line is not None and err.path == "cut"
    rng = random.Random(7)
    for _ in range(300):
        data = bytearray(SAMPLE)
        data[rng.randrange(len(data))] = rng.randrange(256)
        try:
            read_perfinfo(bytes(data), path="m")
        except PerfMapFormatError as err:
            assert err.line is not None
