"""Method names in the CLR profiler's spelling, from the runtime's events and R2R images."""

from __future__ import annotations

import pytest

from profkit.dotnet.methods import MethodTable, method_name, r2r_method_name, type_name
from profkit.formats.nettrace.clr_events import MethodEvent


@pytest.mark.parametrize(
    ("runtime", "profiler"),
    [
        ("System.Collections.Generic.Dictionary`2[System.__Canon,System.__Canon]",
         "System.Collections.Generic.Dictionary`2"),
        ("ProfTest.Outer+Inner", "ProfTest.Outer+Inner"),
        ("ProfTest.Box`1[System.Int32]", "ProfTest.Box`1"),
    ],
)  # fmt: skip
def test_type_names(runtime: str, profiler: str) -> None:
    assert type_name(runtime) == profiler


def test_generic_method_gets_its_arity() -> None:
    sig = "generic value class V`1<!!0>  (value class V`1<!!1>, !!0)"
    assert method_name("Ns.T", "Convert", sig) == "Ns.T.Convert``2"
    assert method_name("Ns.T", "Plain", "int32  (int32)") == "Ns.T.Plain"


@pytest.mark.parametrize(
    ("crossgen", "name"),
    [
        ("System.UInt64 System.Number::RightShiftWithRounding(System.UInt64, System.Int32)",
         "System.Number.RightShiftWithRounding"),
        ("System.__Canon <>f__AnonymousType0`1[System.__Canon]::get_message()",
         "<>f__AnonymousType0`1.get_message"),
        ("System.Void System.Collections.Generic.List`1[System.Int32]::Add(System.Int32)",
         "System.Collections.Generic.List`1.Add"),
        ("System.Int32 System.Array::IndexOf<System.Int32>(System.Int32[], System.Int32)",
         "System.Array.IndexOf``1"),
    ],
)  # fmt: skip
def test_r2r_names(crossgen: str, name: str) -> None:
    assert r2r_method_name(crossgen) == name


def _event(start: int, size: int, ns: str, name: str) -> MethodEvent:
    return MethodEvent("dcend", 1, 2, start, size, 0x06000001, 0, ns, name, "void  ()")


def test_table_lookup_and_image_fallback() -> None:
    table = MethodTable()
    table.add(_event(0x1000, 0x10, "A.B", "M"))
    table.add(_event(0x2000, 0x20, "A.B", "N"))
    table.add(_event(0x3000, 0, "A.B", "Empty"))  # no code: ignored
    assert table.name(0x1000) == "A.B.M" and table.name(0x100F) == "A.B.M"
    assert table.name(0x1010) is None and table.name(0x201F) == "A.B.N"
    table.add_image(0x5000, 0x6000, lambda ip: f"img+{ip - 0x5000:x}")
    assert table.name(0x5010) == "img+10"
    table.add_if_new(_event(0x1000, 0x10, "X", "Other"))
    assert table.name(0x1000) == "A.B.M"
    assert len(table) == 2
