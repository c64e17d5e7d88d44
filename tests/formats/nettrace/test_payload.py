"""Payloads read by their field lists: round trips of encoded values, misfits give None."""

from __future__ import annotations

import struct
import uuid
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from profkit.formats.nettrace import EventMetadata, load_nettrace
from profkit.formats.nettrace.model import FieldDescription, FieldType
from profkit.formats.nettrace.payload import decode_fields

from .conftest import RUNTIME_TRACE
from .nettrace_writer import varuint

INTS = {5: "<b", 6: "<B", 7: "<h", 8: "<H", 9: "<i", 10: "<I", 11: "<q", 12: "<Q"}
TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=8)


def _int_value(code: int) -> st.SearchStrategy[tuple[FieldType, Any, bytes]]:
    size = struct.calcsize(INTS[code])
    signed = INTS[code][1].islower()
    low, high = (
        (-(2 ** (8 * size - 1)), 2 ** (8 * size - 1) - 1) if signed else (0, 2 ** (8 * size) - 1)
    )
    return st.integers(low, high).map(lambda v: (FieldType(code), v, struct.pack(INTS[code], v)))


LEAVES = st.one_of(
    *[_int_value(code) for code in INTS],
    st.booleans().map(lambda b: (FieldType(3), b, struct.pack("<I", b))),
    st.booleans().map(lambda b: (FieldType(26), b, bytes([b]))),
    st.floats(allow_nan=False, width=64).map(lambda f: (FieldType(14), f, struct.pack("<d", f))),
    TEXT.map(lambda t: (FieldType(18), t, t.encode("utf-16-le") + b"\x00\x00")),
    st.uuids().map(lambda u: (FieldType(17), u, u.bytes_le)),
    st.integers(0, 2**64 - 1).map(lambda v: (FieldType(21), v, varuint(v))),
    st.integers(-(2**62), 2**62).map(
        lambda v: (FieldType(20), v, varuint((v << 1) ^ (v >> 63) if v < 0 else v << 1))
    ),
)


def _extend(inner: st.SearchStrategy[tuple[FieldType, Any, bytes]]) -> st.SearchStrategy[Any]:
    def obj(items: list[tuple[str, tuple[FieldType, Any, bytes]]]) -> tuple[FieldType, Any, bytes]:
        unique = dict(items)
        fields = tuple(FieldDescription(name, kind) for name, (kind, _, _) in unique.items())
        value = {name: v for name, (_, v, _) in unique.items()}
        return FieldType(1, fields=fields), value, b"".join(raw for _, _, raw in unique.values())

    objects = st.lists(st.tuples(TEXT, inner), max_size=3).map(obj)
    arrays = LEAVES.flatmap(
        lambda first: st.lists(st.just(first), max_size=3).map(
            lambda items: (
                FieldType(19, element=first[0]),
                [v for _, v, _ in items],
                struct.pack("<H", len(items)) + b"".join(raw for _, _, raw in items),
            )
        )
    )
    return objects | arrays


VALUES = st.recursive(LEAVES, _extend, max_leaves=6)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(TEXT, VALUES), max_size=4))
def test_fields_round_trip(items: list[tuple[str, tuple[FieldType, Any, bytes]]]) -> None:
    unique = dict(items)
    fields = tuple(FieldDescription(name, kind) for name, (kind, _, _) in unique.items())
    payload = b"".join(raw for _, _, raw in unique.values())
    metadata = EventMetadata(1, "P", 1, "E", fields=fields)
    expected = {name: value for name, (_, value, _) in unique.items()}
    assert decode_fields(metadata, payload) == expected
    if payload:
        cut = decode_fields(metadata, payload[:-1])
        assert cut is None or cut != expected


def test_misfits_and_no_field_list() -> None:
    assert decode_fields(EventMetadata(1, "P", 1, "E"), b"\x00") is None
    ints = EventMetadata(1, "P", 1, "E", fields=(FieldDescription("a", FieldType(9)),))
    assert decode_fields(ints, b"\x01\x00") is None
    assert decode_fields(ints, b"\x01\x00\x00\x00") == {"a": 1}
    decimal = EventMetadata(1, "P", 1, "E", fields=(FieldDescription("d", FieldType(15)),))
    assert decode_fields(decimal, bytes(16)) is None


def test_arrays_of_empty_objects_are_bounded() -> None:
    empty = FieldType(1)
    nested = FieldType(19, element=FieldType(19, element=empty))
    metadata = EventMetadata(1, "P", 1, "E", fields=(FieldDescription("x", nested),))
    assert decode_fields(metadata, b"\xff\xff" * 200) is None  # 65535 x 65535 would hang


def test_fixed_arrays_and_code_units() -> None:
    kinds = (
        FieldDescription("f", FieldType(22, element=FieldType(8), count=2)),
        FieldDescription("c", FieldType(4)),
        FieldDescription("u", FieldType(23)),
        FieldDescription("g", FieldType(17)),
    )
    guid = uuid.UUID(int=5)
    payload = struct.pack("<HH", 1, 2) + "é".encode("utf-16-le") + b"z" + guid.bytes_le
    metadata = EventMetadata(1, "P", 1, "E", fields=kinds)
    assert decode_fields(metadata, payload) == {"f": [1, 2], "c": "é", "u": "z", "g": guid}


def test_process_info_of_the_real_trace() -> None:
    trace = load_nettrace(str(RUNTIME_TRACE))
    infos = [
        decode_fields(trace.metadata[e.metadata_id], e.payload)
        for e in trace.events
        if trace.metadata[e.metadata_id].name == "ProcessInfo"
    ]
    assert infos and infos[0] is not None and "Spinner.dll" in infos[0]["CommandLine"]
