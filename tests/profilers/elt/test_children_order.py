"""The order of a node's children in the C recorder's exports (``csrc/flat.c``, ``export.c``).

Nodes keep no children lists (``csrc/native.h``): the exports link the children
themselves from the nodes' parents, and must give them in creation order, the order the
saved rows have always had (a saved profile must not change). Many siblings, created in
an order unlike their functions' own, across several node chunks and many growths of the
node table (whose 4-byte slots keep fewer hash bits at each size), pin that order.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from profkit.profilers.elt import flat, native

pytestmark = pytest.mark.skipif(not native.available(), reason="the C recorder is not built")


@pytest.fixture(autouse=True)
def hot_path() -> str:
    """These tests pick their paths themselves (overrides the conftest's both-ways run)."""
    return "native"


def _calls() -> tuple[list[int], dict[int, list[int]]]:
    """3,000 children of the root and 1-3 grandchildren each (~9,000 nodes, some 20
    table growths), in a shuffled order; every call is made twice, the second time in
    another order (a child found again must not move). Returns the children's creation
    order and each child's grandchildren's."""
    shuffle = random.Random(26).shuffle
    children = list(range(1, 3001))
    shuffle(children)
    below = {}
    for c in children:
        grand = [10_000 + c * 10 + k for k in range(1 + c % 3)]
        shuffle(grand)
        below[c] = grand
    return children, below


def _record() -> tuple[Any, int]:
    assert native.Recorder is not None
    now = [0]

    def clock() -> int:
        now[0] += 1
        return now[0]

    rec = native.Recorder(lambda: ("t", "T"), 0, clock=clock)
    children, below = _calls()
    for again in (False, True):
        for c in reversed(children) if again else children:
            rec.enter(c)
            for g in sorted(below[c]) if again else below[c]:
                rec.enter(g)
                rec.leave(g)
            rec.leave(c)
    return rec, now[0] + 1


def _preorder() -> list[int]:
    """The functions in pre-order, children in creation order."""
    children, below = _calls()
    return [f for c in children for f in (c, *below[c])]


@pytest.mark.parametrize("stop", [True, False])
def test_flat_rows_keep_children_in_creation_order(stop: bool) -> None:
    """The flat export (a stopped recorder's trees taken, a running one's copied): rows in
    pre-order, each node's children in the order they were first called, and each row's
    parent and subtree size as that order has them."""
    rec, now = _record()
    if stop:
        rec.stop()
    _, ((_, data),) = rec.export_flat(now, lambda fid: fid)
    rows = flat.unpack(data)
    assert [row[1] for row in rows[1:]] == _preorder()
    children, below = _calls()
    at = 1
    for c in children:
        assert rows[at][0] == 0 and rows[at][7] == 1 + len(below[c])
        for k in range(len(below[c])):
            assert rows[at + 1 + k][0] == at and rows[at + 1 + k][7] == 1
        at += 1 + len(below[c])
    assert all(row[2] == 2 for row in rows[1:])  # found again, never made twice


def test_export_keeps_children_in_creation_order() -> None:
    """The running recorder's tuple export: pre-order with children in creation order."""
    rec, now = _record()
    _, ((_, rows),) = rec.export(now)
    assert [row[1] for row in rows[1:]] == _preorder()
    assert all(row[2] == 2 for row in rows[1:])
