"""The one tree builder: rows merged by frame (self time derived, empty branches pruned),
and stacks added along their path."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from profkit.calltree.building import Row, add_stack, merge_rows, tree_of
from profkit.calltree.model import CallNode


def test_rows_sharing_a_frame_under_one_parent_merge() -> None:
    # two ids (overloads) named by frame 5 under the root, each with a child of frame 7
    rows: list[Row] = [
        (0, 5, 2, 100, 30, 70),  # row 1
        (0, 5, 1, 50, 50, 50),  # row 2
        (1, 7, 4, 40, 5, 20),  # row 3, under row 1
        (2, 7, 1, 10, 10, 10),  # row 4, under row 2
    ]
    root = merge_rows(rows)
    (node,) = root.children.values()
    assert (node.frame, node.calls, node.inclusive_ns) == (5, 3, 150)
    assert (node.min_ns, node.max_ns) == (30, 70)
    assert node.exclusive_ns == (100 - 40) + (50 - 10)  # each row's own, derived
    child = node.children[7]
    assert (child.calls, child.inclusive_ns, child.exclusive_ns) == (5, 50, 50)
    assert (child.min_ns, child.max_ns) == (5, 20)
    assert root.inclusive_ns == 150 and root.exclusive_ns == 0


def test_empty_branches_are_pruned_and_kept_when_something_is_under_them() -> None:
    rows: list[Row] = [
        (0, 1, 0, 0, 0, 0),  # never completed, nothing under it: dropped
        (0, 2, 0, 0, 0, 0),  # never completed, but a call under it: kept
        (2, 3, 1, 9, 9, 9),
        (0, 4, 0, 0, 0, 0),  # a chain of empties: dropped whole
        (4, 5, 0, 0, 0, 0),
    ]
    root = merge_rows(rows)
    assert list(root.children) == [2]
    assert root.children[2].calls == 0 and root.children[2].children[3].calls == 1
    assert root.inclusive_ns == 0  # the kept empty node has no time of its own


def test_root_totals_keep_the_weight_outside_any_frame() -> None:
    rows: list[Row] = [(0, 1, 3, 30, 0, 0), (0, 2, 0, 5, 0, 0)]
    root = merge_rows(rows, root_incl=100)
    assert root.inclusive_ns == 100 and root.exclusive_ns == 100 - 35
    assert list(root.children) == [1]


def test_self_time_is_never_negative() -> None:
    root = merge_rows([(0, 1, 1, 10, 10, 10), (1, 2, 1, 25, 25, 25)])
    assert root.children[1].exclusive_ns == 0


def test_deep_rows_build_without_recursion() -> None:
    depth = 20_000
    rows: list[Row] = [(i, i % 3, 1, depth - i, 1, 1) for i in range(depth)]
    node = merge_rows(rows)
    for _ in range(depth):
        (node,) = node.children.values()
    assert node.calls == 1 and not node.children


def test_stacks_add_along_their_path() -> None:
    root = tree_of([((1, 2), 2, 20), ((1,), 1, 5), ((), 3, 7)])
    assert (root.calls, root.inclusive_ns, root.exclusive_ns) == (6, 32, 7)
    one = root.children[1]
    assert (one.calls, one.inclusive_ns, one.exclusive_ns) == (3, 25, 5)
    assert (one.children[2].calls, one.children[2].exclusive_ns) == (2, 20)
    leaf = add_stack(root, [1, 2], 1, 1)
    assert leaf is one.children[2] and leaf.calls == 3


@st.composite
def _row_sets(draw: st.DrawFn) -> list[Row]:
    count = draw(st.integers(0, 30))
    rows: list[Row] = []
    for number in range(1, count + 1):
        parent = draw(st.integers(0, number - 1))
        calls = draw(st.integers(0, 3))
        incl = draw(st.integers(0, 1000)) if calls else 0
        rows.append((parent, draw(st.integers(0, 4)), calls, incl, incl, incl))
    return rows


@given(_row_sets())
def test_merging_keeps_every_call_and_leaves_no_empty_leaf(rows: list[Row]) -> None:
    root = merge_rows(rows)
    nodes: list[CallNode] = [n for _, n in root.walk()][1:]
    assert sum(n.calls for n in nodes) == sum(r[2] for r in rows)
    assert sum(n.inclusive_ns for n in nodes) == sum(r[3] for r in rows)
    assert all(n.calls or n.children for n in nodes)
    assert all(n.exclusive_ns >= 0 for n in nodes)
