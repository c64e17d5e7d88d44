"""The capture-time call tree (keyed by function id) and its conversion to a ``CallProfile``.

During capture a node is found by *function id*: an int dict lookup per call, with no
name resolution on the hot path. Names, files and lines are looked up once per id when
the profile is built, and ids that resolve to the same :class:`~profkit.calltree.Frame`
(rare: two code objects with one qualified name) are merged there.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from profkit.calltree.model import CallNode, CallProfile, Frame, ThreadTree

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
    """Copy a capture tree into ``CallNode``s with frame indices, dropping empty branches.

    A node that never completed a call (hidden below the base time, or opened and never
    closed) is kept only when something under it was recorded. Self time is derived here,
    not counted during capture: ``incl`` minus the children's ``incl`` — exact for traces
    (every child call is also a call of its parent; hidden calls add to neither) and for
    samples (the weight of samples ending at the node). With ``root_totals`` the root
    keeps its own ``incl`` (sampling: total weight, so its self time is the weight
    outside any shown frame); otherwise its inclusive time is the sum of its children's.
    Iterative, so a 10 000-deep recursion converts without hitting the recursion limit.
    """
    out_root = CallNode(-1)
    # (capture node, the CallNode it merges into)
    work: list[tuple[Node, CallNode]] = [(root, out_root)]
    # Pre-order copy first, then a post-order pass prunes empty nodes.
    order: list[tuple[CallNode, CallNode | None]] = [(out_root, None)]
    while work:
        node, out = work.pop()
        for child in node.children.values():
            index = profile.frame_id(frame_of(child.fid))  # type: ignore[arg-type]
            existing = out.children.get(index)
            target = existing if existing is not None else out.child(index)
            if existing is None:
                order.append((target, out))
            _merge_stats(target, child)
            work.append((child, target))
    for out, parent in reversed(order):
        if parent is not None and out.calls == 0 and not out.children:
            del parent.children[out.frame]
    if root_totals:
        out_root.inclusive_ns = root.incl
        out_root.exclusive_ns = root.incl - _children_incl(root)
    else:
        out_root.inclusive_ns = sum(c.inclusive_ns for c in out_root.children.values())
    return out_root


def _merge_stats(target: CallNode, node: Node) -> None:
    if node.calls == 0:
        return
    lo = node.min if node.min != NO_MIN else 0
    if target.calls == 0 or lo < target.min_ns:
        target.min_ns = lo
    target.max_ns = max(target.max_ns, node.max)
    target.calls += node.calls
    target.inclusive_ns += node.incl
    target.exclusive_ns += node.incl - _children_incl(node)


def _children_incl(node: Node) -> int:
    return sum(child.incl for child in node.children.values())


def thread_tree(thread_id: int, name: str, root: CallNode) -> ThreadTree:
    return ThreadTree(thread_id=thread_id, name=name, root=root)
