"""Deep chains in the text tree: folded to one line, and the indent kept bounded.

Why: each line of the tree is indented by its depth, so a chain of N single-child calls
(a recursion) printed N lines of up to 2·N guide characters. A Python program recursing
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

from collections.abc import Callable

from profkit.report.shown import ShownNode

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
