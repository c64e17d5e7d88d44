"""EventMask behaves as the enum.IntFlag it was (issue #26): it is built without the
:mod:`enum` module (~9 M instructions of every ``profkit run``'s start-up on 3.11), so it
is held here to an :class:`enum.IntFlag` with the same members, value by value."""

from __future__ import annotations

import copy
import enum
import pickle
from collections.abc import Callable

import pytest

from profkit.api.events import IMMUTABLE, EventMask

#: The same members, as the standard library builds them.
Reference = enum.IntFlag(  # type: ignore[misc]
    "EventMask", [(name, int(member)) for name, member in EventMask.__members__.items()]
)

#: Every value with known bits, negative ones (as ``~`` makes), unknown bits above them.
VALUES = [
    *range(-(1 << 14) - 3, (1 << 14) + 3, 7),
    *range(0, 1 << 13, 1),
    1 << 20,
    (1 << 20) | 5,
    0xFFFF,
    -(1 << 40),
    int(IMMUTABLE) | (1 << 30),
]


def _view(mask: object) -> tuple[object, ...]:
    """Everything a reader sees of one mask."""
    assert isinstance(mask, int)
    return (
        repr(mask),
        str(mask),
        format(mask),
        f"{mask:08x}",
        mask.name,  # type: ignore[attr-defined]
        mask.value,  # type: ignore[attr-defined]
        int(mask),
        bool(mask),
        hash(mask),
        [repr(m) for m in mask],  # type: ignore[attr-defined]
        len(mask),  # type: ignore[arg-type]
    )


def test_a_mask_reads_as_the_int_flag() -> None:
    for value in VALUES:
        assert _view(EventMask(value)) == _view(Reference(value)), value
        assert EventMask(value) is EventMask(value)
        assert type(EventMask(value)) is EventMask


OPS: list[tuple[str, Callable[[object, object], object]]] = [
    ("|", lambda a, b: a | b),  # type: ignore[operator]
    ("&", lambda a, b: a & b),  # type: ignore[operator]
    ("^", lambda a, b: a ^ b),  # type: ignore[operator]
    ("+", lambda a, b: a + b),  # type: ignore[operator]
]


def _same(mine: object, theirs: object) -> bool:
    if isinstance(theirs, enum.Enum):
        return type(mine) is EventMask and _view(mine) == _view(theirs)
    return type(mine) is type(theirs) and mine == theirs


@pytest.mark.parametrize("symbol, op", OPS, ids=[s for s, _ in OPS])
def test_operators_give_what_the_int_flag_gives(
    symbol: str, op: Callable[[object, object], object]
) -> None:
    for a in [*range(0, 1 << 13, 37), 1 << 13, 0xFFFF]:
        for b in (0, 1, 6, int(IMMUTABLE), 1 << 15):
            mine, theirs = EventMask(a), Reference(a)
            assert _same(op(mine, EventMask(b)), op(theirs, Reference(b)))
            assert _same(op(mine, b), op(theirs, b))
            assert _same(op(b, mine), op(b, theirs))
            assert _same(op(mine, True), op(theirs, True))


def test_invert_negate_and_membership() -> None:
    for value in range(0, 1 << 13, 3):
        mine, theirs = EventMask(value), Reference(value)
        assert _same(~mine, ~theirs)
        assert _same(-mine, -theirs)
        for bit in EventMask:
            assert (bit in mine) == (Reference(int(bit)) in theirs)
    with pytest.raises(TypeError):
        1 in EventMask.GC  # type: ignore[operator]  # noqa: B015
    with pytest.raises(TypeError):
        EventMask.GC | "x"  # type: ignore[operator]
    with pytest.raises(ValueError, match="not a valid EventMask"):
        EventMask("GC")  # type: ignore[arg-type]


def test_the_class_reads_as_the_int_flag() -> None:
    assert [repr(m) for m in EventMask] == [repr(m) for m in Reference]
    assert len(EventMask) == len(Reference)
    assert list(EventMask.__members__) == list(Reference.__members__)
    assert repr(EventMask) == repr(Reference)
    for name in Reference.__members__:
        assert _view(EventMask[name]) == _view(Reference[name])
        assert getattr(EventMask, name) is EventMask[name] is EventMask(int(EventMask[name]))
    assert EventMask() is EventMask.NONE  # type: ignore[call-arg]
    assert EventMask(EventMask.GC) is EventMask.GC
    assert IMMUTABLE is EventMask.IMMUTABLE


def test_masks_pickle_and_copy_as_themselves() -> None:
    for mask in (EventMask.GC, EventMask.THREADS | EventMask.GC, EventMask(1 << 20)):
        for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
            assert pickle.loads(pickle.dumps(mask, protocol)) is mask
        assert copy.copy(mask) is mask
        assert copy.deepcopy(mask) is mask
