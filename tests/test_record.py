"""profkit._record: what the dataclasses it replaced offered, and nothing compiled but __init__."""

from __future__ import annotations

import copy
import pickle
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from profkit import _record_inits
from profkit._record import field, fields, record, replace


@record(frozen=True)
class Point:
    x: int
    y: int = 0
    label: str = ""


@record
class Cell:
    value: int


@dataclass(frozen=True, slots=True)
class PointDC:
    x: int
    y: int = 0
    label: str = ""


def test_init_defaults_and_errors_like_a_dataclass() -> None:
    assert Point(1) == Point(1, 0, "") == Point(x=1)
    with pytest.raises(TypeError):
        Point()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Point(1, 2, "a", 4)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Point(1, x=2)  # type: ignore[misc]
    with pytest.raises(TypeError):
        Point(1, z=2)  # type: ignore[call-arg]


def test_a_default_before_a_required_field_is_refused() -> None:
    with pytest.raises(TypeError, match="non-default"):

        @record
        class Bad:
            a: int = 0
            b: int  # type: ignore[misc]


@given(st.integers(), st.integers(), st.text())
def test_repr_eq_hash_match_the_dataclass(x: int, y: int, label: str) -> None:
    rec, dc = Point(x, y, label), PointDC(x, y, label)
    assert repr(rec).removeprefix("Point") == repr(dc).removeprefix("PointDC")
    assert rec == Point(x, y, label) and hash(rec) == hash(Point(x, y, label))
    assert rec != Point(x, y, label + "!")
    assert rec != (x, y, label)  # compared only with its own class
    assert pickle.loads(pickle.dumps(rec)) == rec == copy.copy(rec) == copy.deepcopy(rec)
    assert replace(rec, y=y + 1) == Point(x, y + 1, label)


def test_frozen_refuses_assignment_and_mutable_is_unhashable() -> None:
    p = Point(1)
    with pytest.raises(AttributeError):
        p.x = 2  # type: ignore[misc]
    with pytest.raises(AttributeError):
        del p.x  # type: ignore[misc]
    with pytest.raises(AttributeError):
        p.other = 1  # type: ignore[attr-defined]  # slots: no stray attributes
    c = Cell(1)
    c.value = 2
    assert c == Cell(2)
    with pytest.raises(TypeError):
        hash(c)


def test_fields_match_args_and_replace_rejects_unknown_names() -> None:
    assert fields(Point) == ("x", "y", "label") == Point.__match_args__
    match Point(3, 4):
        case Point(x, y):
            assert (x, y) == (3, 4)
    with pytest.raises(TypeError, match="no field"):
        replace(Point(1), z=2)


def test_creating_a_record_class_imports_no_dataclasses() -> None:
    import subprocess

    code = (
        "import sys\nfrom profkit._record import record\n"
        "@record(frozen=True)\nclass A:\n    a: int\n    b: str = ''\n"
        "assert A(1) == A(1, '') and hash(A(1))\n"
        "print('dataclasses' in sys.modules, 'inspect' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.split() == ["False", "False"]


@record
class Node:
    name: str
    children: dict[str, int] = field(default_factory=dict)
    cache: dict[str, int] = field(default_factory=dict, repr=False, compare=False)

    def __eq__(self, other: object) -> bool:  # a class's own __eq__ is kept
        return isinstance(other, Node) and other.name.lower() == self.name.lower()


def test_default_factory_repr_and_compare_options_and_an_own_eq() -> None:
    a, b = Node("a"), Node("a")
    a.children["x"] = 1
    assert b.children == {} and a.children is not b.children  # a fresh dict each
    assert repr(a) == "Node(name='a', children={'x': 1})"  # cache: repr=False
    assert Node("A") == Node("a")  # the class's own __eq__
    assert Node("a", {"y": 2}).children == {"y": 2}
    with pytest.raises(TypeError):
        hash(a)  # mutable and compared by value


@record(frozen=True)
class Wide:
    """More fields than the precompiled templates have: compiles its own __init__."""

    f00: int
    f01: int
    f02: int
    f03: int
    f04: int
    f05: int
    f06: int
    f07: int
    f08: int
    f09: int
    f10: int
    f11: int
    f12: int
    f13: int
    f14: int
    f15: int
    f16: int
    f17: int
    f18: int
    f19: int
    f20: int = 20


def test_a_record_beyond_the_templates_and_keyword_arguments() -> None:
    assert len(fields(Wide)) > _record_inits.MAX_FIELDS
    w = Wide(*range(20))
    assert (w.f00, w.f19, w.f20) == (0, 19, 20)
    assert Wide(*range(20), f20=5).f20 == 5
    p = Point(label="l", x=2)  # keywords bind to the renamed template's parameters
    assert (p.x, p.y, p.label) == (2, 0, "l")
    assert Point.__init__.__qualname__ == "Point.__init__"


def test_the_templates_are_what_the_generator_writes() -> None:
    import subprocess

    script = Path(__file__).parents[1] / "scripts" / "gen_record_inits.py"
    proc = subprocess.run([sys.executable, str(script), "--check"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


@record(frozen=True, eq=False)
class Handle:
    name: str
    seen: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("a name is needed")
        self.seen["init"] = 1


def test_eq_false_is_identity_and_post_init_runs_last() -> None:
    a, b = Handle("a"), Handle("a")
    assert a != b and a == a and hash(a) != hash(b)
    assert a.seen == {"init": 1}
    with pytest.raises(ValueError, match="name"):
        Handle("")
