"""One type-naming helper for the heap package, and the rationed walk of the types."""

from __future__ import annotations

from profkit.heap import walk
from profkit.heap.typenames import UNNAMED, TypeNames, type_name


class _Meta(type):
    @property
    def __module__(cls) -> str:  # type: ignore[override]
        raise RuntimeError("program code ran")


class _Odd(metaclass=_Meta):
    pass


def test_one_helper_and_one_fallback() -> None:
    assert type_name(int) == "int"
    assert type_name(TypeNames) == "profkit.heap.typenames.TypeNames"
    assert type_name(_Odd) == f"{__name__}._Odd"  # the property never ran
    assert walk.type_name is type_name
    assert UNNAMED.startswith("(")


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 0.001  # every reading: a walk "takes" a millisecond
        return self.now


class _Base:
    pass


def test_a_miss_walks_the_types_at_most_once_per_batch_and_rarely() -> None:
    clock = _Clock()
    names = TypeNames(clock)
    junk = (12345, 67890, 13579)  # words of a buffer: no type lives there
    other = (24680, 11111, 0)
    assert names.name(1, junk) == TypeNames.UNKNOWN
    assert names.walks == 1
    names.new_batch()
    assert names.name(1, other) == TypeNames.UNKNOWN
    assert names.walks == 1  # too soon: at most WALK_SHARE of the time goes to walks
    clock.now += 1.0
    names.new_batch()
    assert names.name(1, (*other[:2], 97531)) == TypeNames.UNKNOWN
    assert names.name(1, (86420,)) == TypeNames.UNKNOWN
    assert names.walks == 2  # once per batch


def test_known_misses_are_storage_at_once_for_a_while() -> None:
    clock = _Clock()
    names = TypeNames(clock)
    junk = (12345, 67890, 0)
    assert names.name(1, junk) == TypeNames.UNKNOWN  # a walk "taking" a millisecond
    clock.now += 0.1  # a walk is due for a fresh miss, not yet for a known one
    for _ in range(3):
        names.new_batch()
        assert names.name(1, junk) == TypeNames.UNKNOWN
        assert names.name(1, (67890, 12345)) == TypeNames.UNKNOWN
    assert names.walks == 1  # seen missing before: no scan, no walk
    assert names.name(1, (12345, 55555)) == TypeNames.UNKNOWN  # one fresh word: a walk
    assert names.walks == 2
    names.new_batch()
    clock.now += 1.0  # past MISS_SHARE's wait: known misses are looked for again
    assert names.name(1, (12345, 55555)) == TypeNames.UNKNOWN
    assert names.walks == 3
    assert names.name(1, (0, id(dict))) == "dict"  # a type is never a known miss


def test_a_new_class_is_found_without_a_walk_when_it_derives_from_object() -> None:
    clock = _Clock()
    names = TypeNames(clock)
    assert names.name(1, (1, 2, 3)) == TypeNames.UNKNOWN  # a walk now: the next is rationed
    assert names.name(1, (id(dict),)) == "dict"
    walks = names.walks

    class Fresh:
        pass

    class Deeper(_Base):
        pass

    names.new_batch()
    assert names.name(1, (0, id(Fresh))).endswith("Fresh")
    assert names.walks == walks
    # under another base: only a walk finds it, and walks are rationed
    assert names.name(1, (id(Deeper),)) == TypeNames.UNKNOWN
    clock.now += 10.0
    names.new_batch()
    assert names.name(1, (id(Deeper),)).endswith("Deeper")


def test_buffers_and_empty_words() -> None:
    names = TypeNames()
    assert names.name(0, (id(dict),)) == TypeNames.BUFFER
    assert names.name(1, ()) == TypeNames.UNKNOWN
    assert names.name(1, (0, 0, 0)) == TypeNames.UNKNOWN
    assert names.walks == 0
