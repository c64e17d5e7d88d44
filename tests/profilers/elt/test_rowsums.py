"""The C passes over export_flat's rows (csrc/rowsums.c): ``frame_sums`` gives the sums
the Python rules they replace give (report/shown.py's hot spots, report/rules.py's heavy
imports: the models below), keys in the same order; ``renumber_frames`` maps the frame
column; both refuse rows they cannot read rather than guess."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from profkit.profilers.elt import flat, native

pytestmark = pytest.mark.skipif(not native.available(), reason="the C recorder is not built")


@pytest.fixture(autouse=True)
def hot_path() -> str:
    """Once, not on both hot paths (the conftest's): these are functions over rows."""
    return "native"


@st.composite
def _rows(draw: st.DrawFn) -> bytearray:
    """Pre-order rows: each row's parent an earlier row on the path to the previous one."""
    n = draw(st.integers(1, 60))
    parents = [-1]
    for i in range(1, n):
        chain, p = [], i - 1
        while p >= 0:
            chain.append(p)
            p = parents[p]
        parents.append(chain[draw(st.integers(0, len(chain) - 1))])
    frames = [-1] + [draw(st.integers(0, 9)) for _ in range(1, n)]
    excl = [0] + [draw(st.integers(0, 10**12)) for _ in range(1, n)]
    size = [1] * n
    for i in range(n - 1, 0, -1):
        size[parents[i]] += size[i]
    return flat.pack([(parents[i], frames[i], 1, 0, excl[i], 0, 0, size[i]) for i in range(n)])


def _sums_model(frames: list[int], values: list[int], skip: set[int]) -> dict[int, int]:
    out: dict[int, int] = {}
    for row in range(1, len(frames)):
        if row not in skip:
            out[frames[row]] = out.get(frames[row], 0) + values[row]
    return out


def _subtree_model(
    parents: list[int], frames: list[int], values: list[int], wanted: set[int]
) -> dict[int, int]:
    inclusive, out = list(values), {}
    for row in range(len(frames) - 1, 0, -1):
        inclusive[parents[row]] += inclusive[row]
        if frames[row] in wanted:
            out[frames[row]] = out.get(frames[row], 0) + inclusive[row]
    return out


@settings(max_examples=200, deadline=None)
@given(_rows(), st.sets(st.integers(0, 59), max_size=6), st.sets(st.integers(0, 11)))
def test_frame_sums_are_the_python_rules(data: bytearray, skip: set[int], wanted: set[int]) -> None:
    frames, excl = flat.column(data, "frame"), flat.column(data, "excl")
    parents = flat.column(data, "parent")
    got = native.frame_sums(frames, excl)
    want = _sums_model(list(frames), list(excl), set())
    assert list(got.items()) == list(want.items())  # the same keys in the same order
    skipped = native.frame_sums(frames, excl, sorted(skip))
    assert list(skipped.items()) == list(_sums_model(list(frames), list(excl), skip).items())
    mask = bytearray(max(wanted, default=0) + 1)
    for frame in wanted:
        mask[frame] = 1
    below = native.frame_sums(frames, excl, None, parents, mask)
    assert below == _subtree_model(list(parents), list(frames), list(excl), wanted)


@settings(max_examples=200, deadline=None)
@given(_rows(), st.lists(st.booleans(), max_size=12), st.lists(st.booleans(), max_size=12))
def test_frame_sums_of_owners_are_the_hot_spots_rule(
    data: bytearray, hidden: list[bool], c_at_root: list[bool]
) -> None:
    """With ``under_root``: report/shown.py's row-by-row rule (each row's self time to its
    nearest shown frame), keys in the same order, over a depth-sized stack (issue #26)."""
    from profkit.report.shown import Hiding, _self_times_each

    frames, excl = flat.column(data, "frame"), flat.column(data, "excl")
    parents = flat.column(data, "parent")
    hiding = Hiding(len(hidden), hidden, (), c_at_root)
    want = _self_times_each(list(parents), list(frames), list(excl), hiding)
    anywhere, under_root = bytes(hiding.anywhere), bytes(hiding.under_root)
    got = native.frame_sums(frames, excl, None, parents, anywhere, under_root)
    assert list(got.items()) == list(want.items())


def test_frame_sums_over_parents_refuse_rows_out_of_pre_order() -> None:
    """A parent before its row but off the path to the row before (not pre-order): the
    stack cannot follow, so ValueError (the callers then take their Python loops)."""
    rows = [(-1, -1, 0, 0, 0, 0, 0, 5), (0, 1, 1, 0, 1, 0, 0, 2), (1, 2, 1, 0, 1, 0, 0, 1)]
    data = flat.pack([*rows, (0, 3, 1, 0, 1, 0, 0, 1), (1, 4, 1, 0, 1, 0, 0, 1)])
    frames, excl = flat.column(data, "frame"), flat.column(data, "excl")
    parents = flat.column(data, "parent")
    with pytest.raises(ValueError, match="pre-order"):
        native.frame_sums(frames, excl, None, parents, b"\1" * 5)
    with pytest.raises(ValueError, match="pre-order"):
        native.frame_sums(frames, excl, None, parents, bytes(5), bytes(5))
    chain: list[tuple[int, ...]] = [(r - 1, 1, 1, 0, 1, 0, 0, 3000 - r) for r in range(1, 3000)]
    deep = flat.pack([(-1, -1, 0, 0, 0, 0, 0, 3000), *chain])
    frames, excl = flat.column(deep, "frame"), flat.column(deep, "excl")
    parents = flat.column(deep, "parent")
    assert native.frame_sums(frames, excl, None, parents, b"\0\1") == {1: sum(range(3000))}
    assert native.frame_sums(frames, excl, None, parents, bytes(2), bytes(2)) == {1: 2999}


def test_frame_sums_refuse_what_they_cannot_read() -> None:
    data = flat.pack([(-1, -1, 0, 0, 0, 0, 0, 2), (0, -3, 1, 5, 5, 5, 5, 1)])
    with pytest.raises(ValueError, match="below 0"):
        native.frame_sums(flat.column(data, "frame"), flat.column(data, "excl"))
    big = flat.pack([(-1, -1, 0, 0, 0, 0, 0, 3), *[(0, 1, 1, 0, 2**62, 0, 0, 1)] * 2])
    with pytest.raises(OverflowError):
        native.frame_sums(flat.column(big, "frame"), flat.column(big, "excl"))
    with pytest.raises(ValueError, match="lengths"):
        native.frame_sums(flat.column(data, "frame"), flat.column(big, "excl"))
    assert native.frame_sums(flat.column(data, "frame")[:1], flat.column(data, "excl")[:1]) == {}


def test_a_tree_whose_nodes_were_read_offers_no_sums() -> None:
    tree = flat.tree(flat.pack([(-1, -1, 0, 3, 0, 0, 0, 2), (0, 0, 1, 3, 3, 3, 3, 1)]))
    sums = tree.flat_sums()
    assert sums is not None
    assert sums(*tree.flat_columns()[1:]) == {0: 3}  # type: ignore[misc]
    tree.children  # noqa: B018 - a node made: the rows no longer speak for the tree
    assert tree.flat_sums() is None


def test_renumber_frames_maps_every_frame_but_the_roots() -> None:
    data = flat.pack(
        [(-1, -1, 0, 0, 0, 0, 0, 3), (0, 2, 1, 0, 0, 0, 0, 2), (1, 0, 1, 0, 0, 0, 0, 1)]
    )
    table = memoryview(bytearray(12)).cast("i")
    table[0], table[1], table[2] = 7, -1, 1
    native.renumber_frames(flat.column(data, "frame"), table)
    assert list(flat.column(data, "frame")) == [-1, 1, 7]
    with pytest.raises(ValueError, match="past the table"):
        native.renumber_frames(flat.column(data, "frame"), table)  # 7 is past it now
    assert list(flat.column(data, "frame")) == [-1, 1, 7]  # nothing changed
