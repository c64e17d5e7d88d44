"""The call tree as text: hottest paths first, fitted to a terminal width, colour on request.

Used by ``profkit report`` and printed at the end of ``profkit run``. Each thread gets a
header and its tree; children are sorted by inclusive time. Columns (total, self, share,
calls) come first so the tree can take whatever width is left; on a terminal, names too
long for it are cut from the left (the end of ``module.qualname`` says most) but never
below :data:`MIN_NAME` characters. Without a width (a file, a pipe) names are shown in
full. Deep trees stay linear in size (:mod:`~profkit.report.shown`): long single-child
chains (a recursion) fold to one line between their ends, and past a bounded indent a
line shows its depth as ``[N]``.

The cost follows what is printed, not the tree's size: the shown tree is worked out only
where it is read (:mod:`~profkit.report.shown`), and the hot spots' one whole-tree pass
reads the recorder's rows, making no node, when the tree still has them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from profkit._text import escape
from profkit.calltree.model import CallProfile
from profkit.report._fmt import Palette, column_header, fit, format_ns, value_formatter
from profkit.report.rules import ThreadRules, own_frames
from profkit.report.shown import (
    KEEP_TOP,
    MAX_LEVELS,
    DeepFold,
    ShownNode,
    deep_chain,
    fold_chain,
    shown_tree,
    tree_prefix,
)
from profkit.report.shown import total_ns as shown_total
from profkit.report.tree import display_names, parse_prefixes

_COLUMNS = "   total     self      %    calls  "
#: Fewest characters a name is cut to on a terminal (a line wraps rather than say less).
MIN_NAME = 40
#: Longest name shown in full off a terminal (the rest is counted, not printed).
MAX_NAME_CHARS = 1000
_MIN_NAME = 16  # the narrowest --width accepted leaves this much for names
#: the header's word for a memory profile's metric (``metadata["metric"]``)
_MEMORY_WORDS = {
    "alloc_bytes": "allocated",
    "peak_bytes": "alive at the peak",
    "leaked_bytes": "alive at the end",
}


def render_tree(
    profile: CallProfile,
    *,
    width: int | None = 80,
    color: bool = False,
    min_time_ns: int = 0,
    prefix: str | Iterable[str] | None = None,
    max_depth: int | None = None,
    top: int | None = None,
    min_share: float = 0.0,
    fold: bool = False,
    hot_spots: int = 0,
) -> str:
    """The text tree of every thread of ``profile``.

    ``min_time_ns`` hides nodes whose inclusive time is lower; ``prefix`` keeps only
    frames under those module prefixes (comma-separated), charging hidden frames' time
    to their nearest shown caller; ``max_depth`` cuts the tree below that depth; ``top``
    keeps only the N hottest children of each node; ``min_share`` (0..1) hides nodes
    under that fraction of their thread's total. Hidden siblings are summarised on
    one ``… N more below <limit>`` line so totals still add up on screen.

    ``width=None``: names are never cut (for a file or a pipe, where nothing wraps
    them badly and a cut name helps nobody); with a width, a name keeps at least
    :data:`MIN_NAME` characters even if the line then wraps.

    ``fold``: import machinery (``<frozen importlib._bootstrap>``) disappears into its
    caller, and a chain of library frames that each pass (almost) all their time to one
    child becomes one ``┆ N frames folded`` line, so the hot path fits on a screen. The
    program's own frames (:func:`own_frames`) are never folded: they say where the hot
    call comes from, and they are the code the user can change.
    ``hot_spots``: so many functions with the most self time over the thread, listed
    above its tree (the tree shows paths; a function hot from many paths is named here).

    Always: profkit's own frames (the runner's, the collector's) are hidden, and
    functions whose name does not identify them (``<lambda>``, ``<listcomp>``, two
    functions of one name) carry ``file:line``.
    """
    pal = Palette(color)
    prefixes = parse_prefixes(prefix)
    if width is not None:
        width = max(width, len(_COLUMNS) + _MIN_NAME)
    labels = display_names(profile)
    rules = ThreadRules(profile, prefixes, fold, hot_spots > 0)
    own = own_frames(profile, prefixes) if fold else []
    out: list[str] = []
    mode = {"trace": "traced", "sample": "sampled"}.get(profile.mode) or _MEMORY_WORDS.get(
        str(profile.metadata.get("metric")), "allocated"
    )
    fmt = value_formatter(profile.mode)
    for thread in profile.threads:
        spots, shown_rules = rules.of(thread.root)  # hot spots before any node is made
        root = shown_tree(thread.root, shown_rules)
        total = shown_total(root)
        if out:
            out.append("")
        header = f"Thread {thread.label}: {fmt(total)} {mode}"
        out.append(
            pal.bold(fit(header, width) if width is not None else escape(header, MAX_NAME_CHARS))
        )
        if not root.children:
            out.append(
                pal.dim("  (no calls recorded" + (" under the prefix)" if prefixes else ")"))
            )
            continue
        if hot_spots:
            out.extend(_hot_spots(spots, labels, total, hot_spots, pal, fmt, width))
        out.append(pal.dim(column_header(_COLUMNS, profile.mode)))
        limit, why = _limit(min_time_ns, min_share, total, fmt)
        view = _View(labels, pal, width, limit, why, max_depth, top, fold, fmt, own)
        view.render(root, total, out)
    if not profile.threads:
        out.append("(empty profile: no threads)")
    return "\n".join(out) + "\n"


def _limit(
    min_time_ns: int, min_share: float, total: int, fmt: Callable[[int], str]
) -> tuple[int, str]:
    """The inclusive time under which nodes are summarised, and the words saying why."""
    share_limit = int(min_share * total)
    limit = max(min_time_ns, share_limit)
    if not limit:
        return 0, ""
    if share_limit >= min_time_ns:
        return limit, f"below {100 * min_share:.3g}% of the thread"
    return limit, f"below the limit ({fmt(min_time_ns)})"


def _hot_spots(
    spots: dict[int, int],
    labels: list[str],
    total: int,
    count: int,
    pal: Palette,
    fmt: Callable[[int], str] = format_ns,
    width: int | None = None,
) -> list[str]:
    """The functions with the most self time over the whole thread, any path; names fitted
    to ``width`` as the tree's are (in full without one)."""
    best = sorted(spots.items(), key=lambda item: -item[1])[:count]
    base = total or 1
    what = "self bytes" if fmt is not format_ns else "self time"
    lines = [pal.dim(f"  hot spots ({what}, all paths):")]
    for frame, self_ns in best:
        if self_ns <= 0:
            break
        share = self_ns / base
        label = labels[frame] if 0 <= frame < len(labels) else "<root>"
        cols = f"  {fmt(self_ns):>8} {100 * share:>5.1f}%  "
        name = escape(label, MAX_NAME_CHARS) if width is None else fit(label, width - len(cols))
        lines.append(pal.heat(share, cols) + name)
    return lines


#: stack items of the view: a node, a "more" summary (count, inclusive, calls), a
#: folded chain (frames, inclusive, packages) or a deep chain's folded middle
_Entry = ShownNode | tuple[int, int, int] | tuple[str, int, str] | DeepFold


class _View:
    """Renders one thread's tree into lines (iteratively: trees can be 20,000 deep)."""

    def __init__(
        self,
        labels: list[str],
        pal: Palette,
        width: int | None,
        limit: int,
        why: str,
        max_depth: int | None,
        top: int | None,
        fold: bool,
        fmt: Callable[[int], str] = format_ns,
        own: list[bool] | None = None,
    ) -> None:
        self.fmt = fmt
        self.own = own or []
        self.labels = labels
        self.pal = pal
        self.width = width
        self.limit = limit
        self.why = why
        self.max_depth = max_depth
        self.top = top
        self.fold = fold
        self.chains: dict[int, tuple[list[ShownNode], ShownNode]] = {}
        #: pushed nodes that are their parent's only line → links of single children
        #: above them (a deep chain is looked for once, when this reaches KEEP_TOP)
        self.runs: dict[int, int] = {}
        room = (width or 10_000) - len(_COLUMNS)
        # the indent is 2 columns per level; beyond this many levels show "[depth]"
        self.room = room
        self.max_levels = max((room - MIN_NAME) // 2, 1) if width is not None else MAX_LEVELS

    def _visible(self, node: ShownNode) -> tuple[list[ShownNode], list[ShownNode]]:
        children = sorted(node.children.values(), key=lambda c: -c.inclusive_ns)
        shown = [c for c in children if c.inclusive_ns >= self.limit]
        if self.top is not None:
            shown = shown[: max(self.top, 0)]
        kept = {id(c) for c in shown}
        return shown, [c for c in children if id(c) not in kept]

    def _passes_through(self, node: ShownNode) -> ShownNode | None:
        """The one child ``node`` hands (nearly) all its time to, else ``None``."""
        if not node.children:
            return None
        shown, hidden = self._visible(node)
        if len(shown) != 1:
            return None
        rest = node.exclusive_ns + sum(c.inclusive_ns for c in hidden)
        return shown[0] if rest <= self.limit else None

    def render(self, root: ShownNode, total: int, out: list[str]) -> None:
        stack: list[tuple[_Entry, tuple[bool, ...], bool, int]] = []
        self._push_children(root, (), 1, stack)
        share_base = total or 1
        pal = self.pal
        while stack:
            entry, guides, is_last, depth = stack.pop()
            tree = tree_prefix(guides, is_last, self.max_levels, depth)
            name_room = max(self.room - len(tree), MIN_NAME if self.width else 1)
            if isinstance(entry, DeepFold):
                out.append(pal.dim(self._deep_line(entry, share_base, tree, name_room)))
                continue
            if isinstance(entry, tuple):
                first = entry[0]
                if isinstance(first, str):  # a folded chain
                    _, incl, packages = entry
                    cols = f"{'':>8} {'':>8} {'':>6} {'':>8}  "
                    label = f"┆ {first} frames folded" + (f" ({packages})" if packages else "")
                    tree = tree[: -len("├─ ")] + "  "  # no branch: the chain goes on below
                    out.append(pal.dim(cols + tree + self._fit(label, name_room)))
                    continue
                count, incl, calls = entry
                cols = f"{self.fmt(incl):>8} {'':>8} {100 * incl / share_base:>5.1f}% {calls:>8}  "
                why = f" {self.why}" if self.why else ""
                label = f"… {count} more{why}"
                out.append(pal.dim(cols + tree + self._fit(label, name_room)))
                continue
            node = entry
            share = node.inclusive_ns / share_base
            cols = (
                f"{self.fmt(node.inclusive_ns):>8} {self.fmt(node.exclusive_ns):>8} "
                f"{100 * share:>5.1f}% {node.calls:>8}  "
            )
            name = self.labels[node.frame] if 0 <= node.frame < len(self.labels) else "<root>"
            hidden_imports = node.folded
            if hidden_imports:
                name += f" [+{hidden_imports} import frames]"
            cut = self.max_depth is not None and depth >= self.max_depth and bool(node.children)
            if cut:
                name += " …"
            out.append(pal.heat(share, cols) + tree + pal.heat(share, self._fit(name, name_room)))
            if not cut:
                below = (*guides, not is_last)
                if not (
                    self._push_chain(node, below, depth + 1, stack)
                    or self._push_deep(node, below, depth + 1, stack)
                ):
                    self._push_children(node, below, depth + 1, stack)

    def _fit(self, text: str, room: int) -> str:
        if self.width is not None:
            return fit(text, room)
        return escape(text, MAX_NAME_CHARS)  # in full, but a 20 MB name is not a name

    def _push_children(
        self,
        node: ShownNode,
        guides: tuple[bool, ...],
        depth: int,
        stack: list[tuple[_Entry, tuple[bool, ...], bool, int]],
    ) -> None:
        shown, hidden = self._visible(node)
        items: list[tuple[_Entry, tuple[bool, ...], bool, int]] = []
        for child in shown:
            if self.fold:
                chain = self._chain(child)
                if len(chain) >= 4:  # child, then two or more folded, then the last
                    self.chains[id(child)] = (chain[1:-1], chain[-1])
            items.append((child, guides, False, depth))
        if self._shows_summary(hidden):
            hidden_ns = sum(c.inclusive_ns for c in hidden)
            summary = (len(hidden), hidden_ns, sum(c.calls for c in hidden))
            items.append((summary, guides, False, depth))
        run = self.runs.pop(id(node), 0)
        if len(items) == 1 and isinstance(items[0][0], ShownNode):
            self.runs[id(items[0][0])] = run + 1
        if items:
            last_item = items[-1]
            items[-1] = (last_item[0], last_item[1], True, last_item[3])
        stack.extend(reversed(items))

    def _shows_summary(self, hidden: list[ShownNode]) -> bool:
        """Whether hidden siblings get their ``… N more`` line: folded views drop a
        summary too small to matter (it would be one line in three)."""
        if not hidden:
            return False
        return not (self.fold and self.limit and sum(c.inclusive_ns for c in hidden) < self.limit)

    def _only_child(self, node: ShownNode) -> ShownNode | None:
        """The one line printed below ``node`` when that is a node, else ``None``."""
        children = node.children
        if len(children) == 1 and self.top != 0:  # the common case in a deep chain
            (child,) = children.values()
            return child if child.inclusive_ns >= self.limit else None
        if not children:
            return None
        shown, hidden = self._visible(node)
        if len(shown) != 1 or self._shows_summary(hidden):
            return None
        return shown[0]

    def _push_deep(
        self,
        node: ShownNode,
        guides: tuple[bool, ...],
        depth: int,
        stack: list[tuple[_Entry, tuple[bool, ...], bool, int]],
    ) -> bool:
        """Below ``node``, the :data:`KEEP_TOP`-th link of a chain of single children: a
        fold line and the chain's lower end, when the chain goes on long enough (see
        :mod:`~profkit.report.shown`). Each chain is walked once, from that node."""
        if self.runs.get(id(node), 0) != KEEP_TOP:
            return False
        found = fold_chain(deep_chain(node, self._only_child, self._room_below(depth)))
        if found is None:
            return False
        del self.runs[id(node)]
        fold, below = found
        stack.append((below, guides, True, depth + len(fold.frames)))
        stack.append((fold, guides, False, depth))
        return True

    def _room_below(self, depth: int) -> int | None:
        """How many levels may be shown from ``depth`` on (``max_depth`` cuts there)."""
        return None if self.max_depth is None else max(self.max_depth - depth + 1, 0)

    def _deep_line(self, fold: DeepFold, share_base: int, tree: str, room: int) -> str:
        share = 100 * fold.inclusive_ns / share_base
        cols = f"{self.fmt(fold.inclusive_ns):>8} {self.fmt(fold.exclusive_ns):>8} {share:>5.1f}% "
        tree = tree[: -len("├─ ")] + "  "  # no branch: the chain goes on below
        return cols + f"{'':>8}  " + tree + self._fit(fold.label(self.labels), room)

    def _push_chain(
        self,
        node: ShownNode,
        guides: tuple[bool, ...],
        depth: int,
        stack: list[tuple[_Entry, tuple[bool, ...], bool, int]],
    ) -> bool:
        """Below a node that starts a foldable chain: the fold line, then its end."""
        found = self.chains.pop(id(node), None)
        if found is None:
            return False
        middle, last = found
        frames = len(middle) + sum(n.folded for n in middle)  # + imports
        line = (str(frames), middle[0].inclusive_ns, self._packages(middle))
        stack.append((last, guides, True, depth))
        stack.append((line, guides, False, depth))
        return True

    def _chain(self, node: ShownNode) -> list[ShownNode]:
        """``node`` and the nodes below it while each passes its time to one child; a frame
        of the program's own code ends the chain (it is shown, never folded)."""
        chain = [node]
        own = self.own
        while True:
            nxt = self._passes_through(chain[-1])
            if nxt is None:
                return chain
            chain.append(nxt)
            if 0 <= nxt.frame < len(own) and own[nxt.frame]:
                return chain

    def _packages(self, nodes: list[ShownNode]) -> str:
        seen: dict[str, None] = {}
        for n in nodes:
            label = self.labels[n.frame]
            seen.setdefault(label.split(".", 1)[0].split(" ", 1)[0], None)
        names = list(seen)
        return ", ".join(names[:4]) + (", …" if len(names) > 4 else "")
