"""R2R paths CoreCLR 3.1's framework never takes, on images written by ``_synth.py``:
funclets, hot/cold splitting (R2R 8.0), ARM64 lengths from unwind data, instance entry
points over generic types, nested types, composite images (RTR_HEADER export, component
assemblies, manifest, module overrides) — and every-offset truncation of each."""

from __future__ import annotations

import hashlib
import struct

import pytest

from profkit.errors import FormatError
from profkit.formats.perfmap.r2rmap import read_r2rmap, write_r2rmap
from profkit.formats.r2r import build_r2rmap, read_r2r_image

from ._synth import ARM64, Assembly, Method, TypeDef, build_image

# MethodDefSig blobs: default/hasthis calling convention, param count, return, params
VOID_NOARGS = bytes([0x20, 0, 0x01])
INT_FROM_STRING = bytes([0x00, 1, 0x08, 0x0E])
T_FROM_T_ARRAY = bytes([0x20, 1, 0x13, 0, 0x1D, 0x13, 0])  # !0 M(!0[])
MVID_A = bytes(range(16))
MVID_B = bytes(range(16, 32))


def _single() -> tuple[bytes, list[tuple[int, int, str, int]]]:
    asm = Assembly("Alpha", MVID_A, [
        TypeDef("Alpha.Core", "Worker", [
            Method("Run", VOID_NOARGS, 0x40, funclet=0x13),
            Method("Parse", INT_FROM_STRING, 0x30, cold=0x20),
        ]),
        TypeDef("", "Inner", [Method(".ctor", VOID_NOARGS, 0x10)], enclosing=1),
        TypeDef("Alpha.Core", "Box`1", [
            Method("Get", T_FROM_T_ARRAY, 0x24, methoddef_entry=False),
        ]),
    ])  # fmt: skip
    # Box`1[System.__Canon]::Get, the instance entry point of method #3 (0-based)
    inst = bytes([0x40, 0x15, 0x12, (4 << 2) | 0, 1, 0x3E, 4])
    return build_image([asm], instance=[(inst, 3)], version=(9, 0))


def test_single_image_bodies_names_funclets_cold_parts() -> None:
    data, expected = _single()
    m = build_r2rmap(read_r2r_image(data, path="alpha.dll"))
    got = list(m.entries())
    run, parse, ctor, get = expected
    want = [
        (run[0], run[1], "Alpha.Core.Worker::Run()"),  # main body + funclet
        (parse[0], 0x30, "System.Int32 Alpha.Core.Worker::Parse(System.String)"),
        (ctor[0], 0x10, "Alpha.Core.Worker+Inner::.ctor()"),
        (get[0], 0x24, "System.__Canon Alpha.Core.Box`1[System.__Canon]::Get(System.__Canon[])"),
        (parse[3], 0x20, "System.Int32 Alpha.Core.Worker::Parse(System.String)"),  # cold
    ]
    assert run[1] == 0x40 + 0x13
    assert sorted(got) == sorted(want)
    data2 = write_r2rmap(m)
    assert write_r2rmap(read_r2rmap(data2)) == data2


def test_arm64_lengths_come_from_unwind_data() -> None:
    asm = Assembly("Arm", MVID_A, [TypeDef("A", "B", [
        Method("F", VOID_NOARGS, 0x40), Method("G", VOID_NOARGS, 0x1C, funclet=0x8),
    ])])  # fmt: skip
    data, expected = build_image([asm], arch=ARM64)
    image = read_r2r_image(data)
    assert image.architecture == "ARM64" and image.tokens == (2, 2, 1)
    got = [(e.rva, e.length) for e in build_r2rmap(image).entries()]
    assert got == [(expected[0][0], 0x40), (expected[1][0], expected[1][1])]


def _composite() -> tuple[bytes, list[tuple[int, int, str, int]]]:
    b = Assembly("Beta", MVID_B, [TypeDef("Beta", "Gen`1", [
        Method("Make", T_FROM_T_ARRAY, 0x18, methoddef_entry=False),
        Method("Go", VOID_NOARGS, 0x10),
    ])])  # fmt: skip
    a = Assembly("alpha", MVID_A, [TypeDef("Alpha", "Main", [Method("Run", VOID_NOARGS, 0x20)])])
    # Beta's Gen`1[System.__Canon]::Make through a module override (component 2 = index 2)
    inst = bytes([0x40, 0x3F, 2, 0x15, 0x12, (2 << 2) | 0, 1, 0x3E, 1])
    return build_image([a, b], composite=True, instance=[(inst, 1)])


def test_composite_image() -> None:
    data, expected = _composite()
    image = read_r2r_image(data, path="framework-r2r.dll")
    assert image.composite and [c.name for c in image.components] == ["alpha", "Beta"]
    m = build_r2rmap(image)
    names = {e.rva: e.name for e in m.entries()}
    assert names[expected[0][0]] == "Alpha.Main::Run()"
    assert names[expected[1][0]] == (
        "System.__Canon Beta.Gen`1[System.__Canon]::Make(System.__Canon[])"
    )
    assert names[expected[2][0]] == "Beta.Gen`1::Go()"
    # crossgen2's composite signature: both inputs' MVIDs, sorted by name ignoring case
    want = hashlib.md5(MVID_A + MVID_B + struct.pack("<III", 2, 3, 1)).digest()
    assert m.header.signature == want


@pytest.mark.parametrize("make", [_single, _composite])
def test_synthetic_truncated_at_every_offset(make) -> None:  # type: ignore[no-untyped-def]
    data, _ = make()
    for cut in range(len(data)):
        try:
            build_r2rmap(read_r2r_image(data[:cut], path="s.dll"))
        except FormatError as exc:
            assert exc.offset is not None and exc.path == "s.dll"
