"""The one way a call tree is built: from a recorder's rows, or from sampled stacks.

Two shapes of input reach profkit, and each has one builder here:

* **Rows** (:func:`merge_rows`): a recorder's capture nodes — the pure-Python ELT
  recorder's and sampler's (:func:`profkit.profilers.elt.tree.convert`), the .NET
  profiler's (:mod:`profkit.clr.convert`) — one row per (parent, function id), with calls,
  inclusive time, shortest and longest call. Function ids that name the same frame
  (overloads, two code objects with one qualified name) are **merged by frame** under each
  parent; **self time is derived** (inclusive minus the row's children's inclusive, never
  below zero), not counted during capture; a node that never completed a call and has
  nothing under it is **pruned** (hidden below the base time, or still running).
* **Stacks** (:func:`add_stack`, :func:`tree_of`): sampled or allocation stacks, each with
  a count and a weight — the out-of-process sampler's (:mod:`profkit.sampler.recorder`),
  the memory profiler's and memory views (``profilers/memory.py``, ``report/metric.py``),
  the .NET sampler's. Every node on a stack's path gets the weight inclusively and the
  count as ``calls``; the last one also gets the weight exclusively.

Both are iterative: a 10 000-deep recursion builds without touching the recursion limit.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from profkit.calltree.model import CallNode

#: ``(parent row, frame index, calls, inclusive, min, max)``: row numbers start at 1 in the
#: order given (a parent before its children); parent 0 is the root.
Row = tuple[int, int, int, int, int, int]


def merge_rows(rows: Sequence[Row], root_incl: int | None = None) -> CallNode:
    """The call tree (root ``frame == -1``) of ``rows``, merged by frame, self time
    derived, empty branches pruned.

    ``root_incl``: the root's own inclusive total (sampling: the total weight, so the
    root's self time is the weight outside any shown frame); None: the root's inclusive
    time is the sum of its children's, and it has no self time.
    """
    root = CallNode(-1)
    children_incl = [0] * (len(rows) + 1)
    for parent_row, _frame, _calls, incl, _lo, _hi in rows:
        children_incl[parent_row] += incl
    merged: list[CallNode] = [root]  # row number -> the node it merged into
    created: list[tuple[CallNode, CallNode]] = []  # (node, its parent), parents first
    for number, (parent_row, frame, calls, incl, lo, hi) in enumerate(rows, 1):
        above = merged[parent_row]
        node = above.children.get(frame)
        if node is None:
            node = above.children[frame] = CallNode(frame)
            created.append((node, above))
        merged.append(node)
        if calls:
            if node.calls == 0 or lo < node.min_ns:
                node.min_ns = lo
            node.max_ns = max(node.max_ns, hi)
            node.calls += calls
            node.inclusive_ns += incl
            node.exclusive_ns += max(0, incl - children_incl[number])
    for node, above in reversed(created):  # children before parents
        if node.calls == 0 and not node.children:
            del above.children[node.frame]
    if root_incl is None:
        root.inclusive_ns = sum(c.inclusive_ns for c in root.children.values())
    else:
        root.inclusive_ns = root_incl
        root.exclusive_ns = root_incl - children_incl[0]
    return root


def add_stack(root: CallNode, stack: Iterable[int], count: int, weight: int) -> CallNode:
    """Add one stack (frame indices, outermost first) seen ``count`` times with ``weight``
    under ``root`` (which counts it too); the innermost node (``root`` for an empty stack)."""
    root.calls += count
    root.inclusive_ns += weight
    node = root
    for frame in stack:
        node = node.child(frame)
        node.calls += count
        node.inclusive_ns += weight
    node.exclusive_ns += weight
    return node


def tree_of(stacks: Iterable[tuple[Sequence[int], int, int]]) -> CallNode:
    """A call tree from ``(frame indices outermost first, count, weight)`` rows (see
    :func:`add_stack`); the root holds the totals."""
    root = CallNode(-1)
    for stack, count, weight in stacks:
        add_stack(root, stack, count, weight)
    return root
