"""The capture-time call tree (keyed by function id) and its conversion to a ``CallProfile``.

During capture a node is found by *function id*: an int dict lookup per call, with no
name resolution on the hot path. Names, files and lines are looked up once per id when
the profile is built, and ids that resolve to the same :class:`~profkit.calltree.Frame`
(rare: two code objects with one qualified name) are merged there.
"""

from __future__ import annotations

from collections.abc import Callable

from profkit.calltree.model import CallNode, CallProfile, Frame, ThreadTree

TYPE_CHECKING = False  # typing's, without importing typing at run time (profkit run's start-up)
if TYPE_CHECKING:
    from typing import Any

    from profkit.calltree.building import Row

#: ``min_ns`` of a node that has not completed a call yet (replaced by 0 on conversion).
NO_MIN = 1 << 62


class Node:
    """One call-tree position during capture; plain slots for cheap attribute updates."""

    __slots__ = ("calls", "children", "fid", "incl", "kind", "max", "min", "start")

    def __init__(self, fid: int | None) -> None:
        self.fid = fid
        self.calls = 0
        self.incl = 0
        self.min = NO_MIN
        self.max = 0
        self.children: dict[int, Node] = {}
        #: when the activation in progress started or resumed (a node is active at most
        #: once per thread at a time)
        self.start = 0
        #: event lines: "Enter"/"Resume" for a call; on a thread's root, how many stack
        #: entries have had their line written (-1: a silent stack)
        self.kind: Any = "Enter"

    def child(self, fid: int) -> Node:
        node = self.children.get(fid)
        if node is None:
            node = self.children[fid] = Node(fid)
        return node


def convert(
    root: Node,
    profile: CallProfile,
    frame_of: Callable[[int], Frame],
    *,
    root_totals: bool,
) -> CallNode:
    """The capture tree as a ``CallNode`` tree with frame indices: its nodes as rows for
    :func:`profkit.calltree.building.merge_rows` (merged by frame, self time derived,
    empty branches dropped: the one rule for every recorder's rows).

    With ``root_totals`` the root keeps its own ``incl`` (sampling: total weight, so its
    self time is the weight outside any shown frame); otherwise its inclusive time is the
    sum of its children's. Frames are interned in the order they were before the rule
    moved to ``calltree`` (the rows' order), so saved profiles are the same bytes.
    Iterative, so a 10 000-deep recursion converts without hitting the recursion limit.
    """
    # At the end only: every environment-activated child imports this module at start-up.
    from profkit.calltree.building import merge_rows

    rows: list[Row] = []
    work: list[tuple[Node, int]] = [(root, 0)]  # (capture node, its row number)
    while work:
        node, number = work.pop()
        for child in node.children.values():
            index = profile.frame_id(frame_of(child.fid))  # type: ignore[arg-type]
            lo = child.min if child.min != NO_MIN else 0  # sampled nodes have no shortest call
            rows.append((number, index, child.calls, child.incl, lo, child.max))
            work.append((child, len(rows)))
    return merge_rows(rows, root.incl if root_totals else None)


def thread_tree(thread_id: int, name: str, root: CallNode) -> ThreadTree:
    return ThreadTree(thread_id=thread_id, name=name, root=root)
