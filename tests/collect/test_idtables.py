"""The id tables (``idtables.py``): C functions' ids and names."""

from __future__ import annotations

import gc
import weakref
from typing import Any

import pytest

from profkit.collect.idtables import FunctionTable


class PkList(list):  # type: ignore[type-arg]
    pass


class _Meta(type):
    def __hash__(cls) -> int:
        raise AssertionError("the program's code ran")


class PkDict(dict, metaclass=_Meta):  # type: ignore[type-arg]
    pass


def _name(table: FunctionTable, func: Any) -> str:
    info = table.info(table.native_id(func))
    assert info.is_native
    return f"{info.module}.{info.name}"


def test_bound_methods_of_one_c_function_share_an_id() -> None:
    table = FunctionTable()
    assert table.native_id([].append) == table.native_id([1].append)
    assert table.native_id("".join) == table.native_id("x".join)
    assert table.native_id([].append) != table.native_id([].pop)
    assert table.native_id(len) % 2 == 1  # odd: never a code object's id


@pytest.mark.parametrize(
    ("func", "name"),
    [
        (len, "builtins.len"),
        ([].append, "builtins.list.append"),
        (PkList().append, f"{__name__}.PkList.append"),
        (dict.fromkeys, "builtins.dict.fromkeys"),
        (PkDict.fromkeys, f"{__name__}.PkDict.fromkeys"),
        (str.join, "<native>.str.join"),  # a method descriptor (c_call binds it first)
    ],
)
def test_names_and_the_quick_path_agrees_with_the_named_one(func: Any, name: str) -> None:
    quick, named = FunctionTable(), FunctionTable()
    assert _name(quick, func) == name
    assert quick.native_id(func) == quick.native_id(func)
    fid = named._named_native_id(func)
    assert f"{named.info(fid).module}.{named.info(fid).name}" == name  # type: ignore[arg-type]


def test_a_subclass_method_is_its_own_function() -> None:
    table = FunctionTable()
    assert table.native_id(PkList().append) != table.native_id([].append)
    assert table.native_id(PkDict.fromkeys) != table.native_id(dict.fromkeys)


def _short_lived_class() -> tuple[Any, Any]:
    class PkShortLived(list):  # type: ignore[type-arg]
        pass

    return PkShortLived, weakref.ref(PkShortLived)


def test_a_class_seen_through_its_c_methods_is_not_kept_alive() -> None:
    """Keeping it would change the program (its weakref callbacks, its memory)."""
    table = FunctionTable()
    cls, ref = _short_lived_class()
    fid = table.native_id(cls().append)
    assert table.native_id(cls().append) == fid  # the quick path
    del cls
    gc.collect()
    assert ref() is None
    again, _ = _short_lived_class()  # may take the dead class's address: same name, same id
    assert table.native_id(again().append) == fid
