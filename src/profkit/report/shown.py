"""A thread's tree as the text view shows it, made only where the view reads it.

Why lazy: the end of ``profkit run`` prints about 40 lines of a tree that can have
~100,000 nodes (sympy), and copying the whole tree to hide profkit's frames and fold the
import machinery cost more CPU (1.1 s) and memory (+66 MB) than the program's own run.
A :class:`ShownNode` stands for the nodes of one frame under one shown path (several
real nodes once hidden frames between them are taken out) and works out its children
only when they are read, so the cost follows what is printed: the shown nodes, their
children's totals, and the hidden frames directly under them.

The rules (:class:`Hiding`) are the ones a copy used to apply: a hidden frame's children
move up to its nearest shown caller (merged with a same-frame sibling there) and its self
time is charged to that caller; import machinery counts as folded frames; a C function
left at the thread's root (called by hidden frames only) is hidden as well.

:func:`self_times` is the one whole-tree pass the view needs (hot spots: self time by
function over every path), over the recorder's flat rows when the tree still has them,
without making a node.

**Deep chains** are folded to one line, and the indent kept bounded (here, not in a module
of their own: the end-of-run tree loads both at every run). Why: each line of the tree is
indented by its depth, so a chain of N single-child calls (a recursion) printed N lines of
up to 2·N guide characters. A Python program recursing
8,000 deep printed 55 MB of tree at the end of its run, and a 900 KB saved profile needed
over 1 GiB to report (issue #22, item 6). Two rules make every text view linear in the
size of the profile:

* a chain of single-child links longer than :data:`KEEP_TOP` + :data:`MIN_FOLDED` +
  :data:`KEEP_BOTTOM` shows its first
  :data:`KEEP_TOP` nodes (where the program enters it: its own frames stay readable at
  the top), one ``┆ N levels folded: f × N`` line naming the repeating frames, and its
  last :data:`KEEP_BOTTOM` nodes (where the time is spent), as pyinstrument and
  speedscope keep the ends of a deep stack in view;
* the guides never take more than :data:`MAX_LEVELS` levels: beyond, a line starts with
  its depth as ``[N]`` (see :func:`tree_prefix`), with or without a terminal width.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

from profkit.calltree.model import CallNode

ROOT = -1  #: the frame of a thread's root


class Hiding:
    """Which frames the view leaves out, as flags by frame index (``frames`` of them)."""

    __slots__ = ("anywhere", "folds", "under_root")

    def __init__(
        self,
        frames: int,
        hidden: Sequence[bool] = (),
        imports: Sequence[bool] = (),
        c_at_root: Sequence[bool] = (),
    ) -> None:
        """``hidden``: dropped, time to the caller (profkit's own, outside ``--prefix``);
        ``imports``: dropped and counted as folded; ``c_at_root``: dropped where their
        nearest shown caller is the thread's root. Missing flags are False."""

        def flags(given: Sequence[bool]) -> list[bool]:
            out = [bool(x) for x in given[:frames]]
            return out + [False] * (frames - len(out))

        hide, imp, c_root = flags(hidden), flags(imports), flags(c_at_root)
        #: dropped wherever they are
        self.anywhere = [h or i for h, i in zip(hide, imp, strict=True)]
        #: dropped when their nearest shown caller is the root
        self.under_root = [a or c for a, c in zip(self.anywhere, c_root, strict=True)]
        #: dropping them counts as folding a frame
        self.folds = [i and not h for h, i in zip(hide, imp, strict=True)]

    def drops(self, frame: int, under_root: bool) -> bool:
        """Whether ``frame`` is left out (frames outside the table never are)."""
        flags = self.under_root if under_root else self.anywhere
        return 0 <= frame < len(flags) and flags[frame]


class ShownNode:
    """One node of the shown tree: the real nodes merged into it (``sources``) and their
    summed calls and inclusive time; self time, folded frames and children are worked
    out (:meth:`expand`) on first read."""

    __slots__ = (
        "_children",
        "_exclusive",
        "_folded",
        "calls",
        "frame",
        "hiding",
        "inclusive_ns",
        "sources",
    )

    def __init__(self, frame: int, source: CallNode, hiding: Hiding) -> None:
        self.frame = frame
        self.hiding = hiding
        self.calls = source.calls
        self.inclusive_ns = source.inclusive_ns
        self.sources = [source]
        self._children: dict[int, ShownNode] | None = None
        self._exclusive = 0
        self._folded = 0

    def add(self, source: CallNode) -> None:
        """Merge one more real node of this frame (under the same shown path)."""
        self.sources.append(source)
        self.calls += source.calls
        self.inclusive_ns += source.inclusive_ns

    @property
    def children(self) -> dict[int, ShownNode]:
        """The shown children by frame."""
        return self.expand()._children  # type: ignore[return-value]

    @property
    def exclusive_ns(self) -> int:
        """Own self time plus that of the hidden frames directly below."""
        return self.expand()._exclusive

    @property
    def folded(self) -> int:
        """Import-machinery frames folded into this node."""
        return self.expand()._folded

    def expand(self) -> ShownNode:
        """Work out children, self time and folded count (once): the sources' children,
        with hidden ones replaced by theirs, same frames merged."""
        if self._children is not None:
            return self
        hiding = self.hiding
        drop = hiding.under_root if self.frame == ROOT else hiding.anywhere
        folds = hiding.folds
        known = len(drop)
        children: dict[int, ShownNode] = {}
        exclusive = folded = 0
        work: list[CallNode] = []
        for source in reversed(self.sources):
            exclusive += source.exclusive_ns
            work.extend(reversed(source.children.values()))
        pop, extend = work.pop, work.extend
        while work:
            real = pop()
            frame = real.frame
            if 0 <= frame < known and drop[frame]:
                exclusive += real.exclusive_ns
                folded += folds[frame]
                extend(reversed(real.children.values()))
                continue
            shown = children.get(frame)
            if shown is None:
                children[frame] = ShownNode(frame, real, hiding)
            else:
                shown.add(real)
        self._children = children
        self._exclusive = exclusive
        self._folded = folded
        return self


def shown_tree(root: CallNode, hiding: Hiding) -> ShownNode:
    """The shown view of a thread's tree (its root; nothing below is made yet)."""
    return ShownNode(ROOT, root, hiding)


def total_ns(root: ShownNode) -> int:
    """The time a shown tree covers: the root's, or its children's sum when unset."""
    return root.inclusive_ns or sum(c.inclusive_ns for c in root.children.values())


#: ``flat_columns()`` of a tree that offers its rows: (parents, frames, self times)
Columns = tuple[Sequence[int], Sequence[int], Sequence[int]]


def self_times(root: CallNode, hiding: Hiding) -> dict[int, int]:
    """Self time by frame over the whole tree as the view shows it: a hidden frame's
    self time goes to its nearest shown caller (the root's share to no function).

    One pass over the recorder's flat rows when the tree offers them (``flat_columns``:
    no node made), else one walk over the nodes.
    """
    columns: Callable[[], Columns | None] | None = getattr(root, "flat_columns", None)
    flat = columns() if columns is not None else None
    if flat is not None:
        sums = getattr(root, "flat_sums", None)  # the rows' own C pass (elt/flat.py)
        return _self_times_rows(*flat, hiding, sums() if sums is not None else None)
    out: dict[int, int] = {}
    stack: list[tuple[CallNode, int]] = [(c, ROOT) for c in root.children.values()]
    pop, push = stack.pop, stack.append
    while stack:
        node, owner = pop()
        frame = node.frame
        if not hiding.drops(frame, owner == ROOT):
            owner = frame
        if owner != ROOT:
            out[owner] = out.get(owner, 0) + node.exclusive_ns
        for child in node.children.values():
            push((child, owner))
    return out


#: Most rows dropped at the root for which :func:`_self_times_rows` looks them up one by
#: one; past it (a ``--prefix`` view) the row-by-row loop is cheaper.
_MOST_ROOT_DROPPED = 64


def _self_times_rows(
    parents: Sequence[int],
    frames: Sequence[int],
    exclusive: Sequence[int],
    hiding: Hiding,
    sums: Callable[..., dict[int, int] | None] | None = None,
) -> dict[int, int]:
    """:func:`self_times` over pre-order rows (row 0 the root; parents before children).

    ``sums`` (elt/flat.py's ``flat_sums``: C; None where it refuses) runs the row-by-row
    rule (:func:`_self_times_each`, half the end-of-run tree's instructions in Python) over
    a depth-sized stack: its owner array, or the parent column's copy below, was the run's
    peak (test_arit: 1.2 M rows; issue #26). Else, when no row's frame is dropped anywhere,
    the only dropped rows are C functions under the root (or under such rows), found in the
    parent column (``bytes.find``); every other row adds its self time to its own frame in
    one tight loop. Same result, keys in the same order (equal hot spots keep theirs)."""
    count = len(frames)
    if count < 2:
        return {}
    anywhere, under_root = hiding.anywhere, hiding.under_root
    if sums is not None:
        found = sums(frames, exclusive, None, parents, bytes(anywhere), bytes(under_root))
        if found is not None:
            return found
    known = len(anywhere)
    whole = sums(frames, exclusive) if sums is not None else None  # keys: the frames used
    used = whole if whole is not None else set(frames[1:])  # set(): one C pass
    if min(used) < 0 or max(used) >= known or any(anywhere[frame] for frame in used):
        return _self_times_each(parents, frames, exclusive, hiding)
    dropped = _dropped_at_root(parents, frames, under_root)
    if dropped is None:
        return _self_times_each(parents, frames, exclusive, hiding)
    found = sums(frames, exclusive, dropped) if sums is not None and dropped else whole
    if found is not None:
        return found
    out: dict[int, int] = {}
    get = out.get
    start = 1
    for stop in [*dropped, count]:
        for frame, own in zip(frames[start:stop], exclusive[start:stop], strict=True):
            out[frame] = get(frame, 0) + own
        start = stop + 1
    return out


def _dropped_at_root(
    parents: Sequence[int], frames: Sequence[int], under_root: Sequence[bool]
) -> list[int] | None:
    """The rows dropped as C functions at the root (their parent the root or another
    such row), in row order, when no row is dropped anywhere; None past
    :data:`_MOST_ROOT_DROPPED` of them."""
    if isinstance(parents, memoryview) and parents.format == "i" and parents.c_contiguous:
        data = parents.tobytes()  # the recorder's column: its int32s, no array module
    else:
        from array import array

        data = array("i", parents).tobytes()
    owners = [0]  # rows whose nearest shown frame is the root: their children may drop
    dropped: list[int] = []
    for row in owners:
        pattern = row.to_bytes(4, sys.byteorder, signed=True)
        at = data.find(pattern, 4 * (row + 1))
        while at != -1:
            if not at % 4:
                child = at // 4
                if under_root[frames[child]]:
                    dropped.append(child)
                    owners.append(child)
                    if len(dropped) > _MOST_ROOT_DROPPED:
                        return None
            at = data.find(pattern, at + 1)
    dropped.sort()
    return dropped


def _self_times_each(
    parents: Sequence[int], frames: Sequence[int], exclusive: Sequence[int], hiding: Hiding
) -> dict[int, int]:
    """:func:`_self_times_rows` row by row: each row's nearest shown frame, kept."""
    out: dict[int, int] = {}
    # Each row's nearest shown frame (itself when shown), int32 (a list's int objects took
    # +35 MB on test_arit); a cast memoryview, not array.array (loading the array module
    # cost ~1 M instructions of every end-of-run tree; issue #26). 0xff bytes: ROOT.
    owners = memoryview(bytearray(b"\xff" * (4 * len(frames)))).cast("i")
    anywhere, under_root = hiding.anywhere, hiding.under_root
    known = len(anywhere)
    get = out.get
    for row in range(1, len(frames)):
        owner = owners[parents[row]]
        frame = frames[row]
        drop = under_root if owner == ROOT else anywhere
        if not (0 <= frame < known and drop[frame]):
            owner = frame
        owners[row] = owner
        if owner != ROOT:
            out[owner] = get(owner, 0) + exclusive[row]
    return out


#: Fewest links folded into one line (a shorter chain is shown whole).
MIN_FOLDED = 12
#: Nodes of a folded chain shown above its fold line (where the program enters it).
KEEP_TOP = 8
#: Nodes of a folded chain shown below its fold line (where its time is spent).
KEEP_BOTTOM = 4
#: Most levels of guides a line is indented by, with or without a terminal width.
MAX_LEVELS = 40
#: Longest repeating cycle named as such (``(a → b) × 100``); longer ones are listed.
_MAX_PERIOD = 4
#: Functions named on a fold line whose frames do not repeat.
_MAX_NAMED = 3


class DeepFold:
    """The middle of a deep chain, shown as one line: how many levels, their time."""

    __slots__ = ("exclusive_ns", "frames", "inclusive_ns")

    def __init__(self, nodes: list[ShownNode]) -> None:
        self.frames = [n.frame for n in nodes]
        self.inclusive_ns = nodes[0].inclusive_ns
        self.exclusive_ns = sum(n.exclusive_ns for n in nodes)

    def label(self, labels: list[str]) -> str:
        """``┆ 7992 levels folded: f × 7992`` (or ``(a → b) × 3996``, or ``a → b → … → z``)."""
        frames = self.frames

        def name(frame: int) -> str:
            return labels[frame] if 0 <= frame < len(labels) else "<root>"

        head = f"┆ {len(frames)} levels folded: "
        period = _period(frames)
        if period == 1:
            return head + f"{name(frames[0])} × {len(frames)}"
        if period:
            cycle = " → ".join(name(f) for f in frames[:period])
            times, rest = divmod(len(frames), period)
            tail = "".join(f" → {name(f)}" for f in frames[:rest])
            return head + f"({cycle}) × {times}{tail}"
        first = [name(f) for f in frames[:_MAX_NAMED]]
        return head + " → ".join([*first, "…", name(frames[-1])])


def _period(frames: list[int]) -> int:
    """The shortest cycle (at most :data:`_MAX_PERIOD` frames) that ``frames`` repeats
    (at least twice; the last repeat may be cut short), else 0."""
    count = len(frames)
    for period in range(1, _MAX_PERIOD + 1):
        twice = count >= 2 * period
        if twice and all(frames[i] == frames[i - period] for i in range(period, count)):
            return period
    return 0


def deep_chain(
    start: ShownNode, only_child: Callable[[ShownNode], ShownNode | None], most: int | None
) -> list[ShownNode]:
    """The nodes below ``start`` while each one shown has exactly one shown child
    (``only_child``), ``start`` excluded, at most ``most`` of them; iterative."""
    chain: list[ShownNode] = []
    node = only_child(start)
    while node is not None and (most is None or len(chain) < most):
        chain.append(node)
        node = only_child(node)
    return chain


def fold_chain(chain: list[ShownNode]) -> tuple[DeepFold, ShownNode] | None:
    """The rest of a deep chain below its first :data:`KEEP_TOP` links: its folded
    middle and the node shown below the fold line; ``None`` when it is short enough
    to show whole."""
    if len(chain) < KEEP_BOTTOM + MIN_FOLDED:
        return None
    return DeepFold(chain[:-KEEP_BOTTOM]), chain[-KEEP_BOTTOM]


def tree_prefix(guides: tuple[bool, ...], is_last: bool, max_levels: int, depth: int) -> str:
    """Box-drawing guides for one line: ``│ `` per open ancestor, then ``├─``/``└─``.

    Past ``max_levels`` the outer guides give way to a ``[depth]`` marker, so the indent
    never grows beyond the room the name needs (nor beyond :data:`MAX_LEVELS`).
    """
    budget = 2 * (min(max_levels, MAX_LEVELS) - 1)
    lead = ""
    shown = guides
    if 2 * len(guides) > budget:
        lead = f"[{depth}] "
        keep = max((budget - len(lead)) // 2, 0)
        shown = guides[len(guides) - keep :] if keep else ()
    connector = "└─ " if is_last else "├─ "
    return lead + "".join("│ " if g else "  " for g in shown) + connector
