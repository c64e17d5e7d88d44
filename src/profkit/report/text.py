"""The call tree as text: hottest paths first, fitted to a terminal width, colour on request.

Used by ``profkit report`` and printed at the end of ``profkit run``. Each thread gets a
header and its tree; children are sorted by inclusive time. Columns (total, self, share,
calls) come first so the tree can take whatever width is left; names too long for it are
cut from the left (the end of ``module.qualname`` says most) and very deep paths show
their depth as ``[N]`` instead of an ever-growing indent.
"""

from __future__ import annotations

from collections.abc import Iterable

from profkit.calltree.model import CallNode, CallProfile
from profkit.report._fmt import Palette, column_header, fit, format_ns
from profkit.report.tree import filter_prefix, frame_label, parse_prefixes, total_ns

_COLUMNS = "   total     self      %    calls  "
_MIN_NAME = 16


def render_tree(
    profile: CallProfile,
    *,
    width: int = 80,
    color: bool = False,
    min_time_ns: int = 0,
    prefix: str | Iterable[str] | None = None,
    max_depth: int | None = None,
    top: int | None = None,
    min_share: float = 0.0,
) -> str:
    """The text tree of every thread of ``profile``.

    ``min_time_ns`` hides nodes whose inclusive time is lower; ``prefix`` keeps only
    frames under those module prefixes (comma-separated), charging hidden frames' time
    to their nearest shown caller; ``max_depth`` cuts the tree below that depth; ``top``
    keeps only the N hottest children of each node; ``min_share`` (0..1) hides nodes
    under that fraction of their thread's total. Hidden siblings are summarised on
    one ``… N more`` line so totals still add up on screen.
    """
    pal = Palette(color)
    prefixes = parse_prefixes(prefix)
    width = max(width, len(_COLUMNS) + _MIN_NAME)
    out: list[str] = []
    mode = "traced" if profile.mode == "trace" else "sampled"
    for thread in profile.threads:
        root = filter_prefix(profile, thread.root, prefixes)
        total = total_ns(root)
        if out:
            out.append("")
        header = f"Thread {thread.name} (id {thread.thread_id}): {format_ns(total)} {mode}"
        out.append(pal.bold(fit(header, width)))
        if not root.children:
            out.append(
                pal.dim("  (no calls recorded" + (" under the prefix)" if prefixes else ")"))
            )
            continue
        out.append(pal.dim(column_header(_COLUMNS, profile.mode)))
        limit = max(min_time_ns, int(min_share * total))
        _render_thread(profile, root, total, out, pal, width, limit, max_depth, top)
    if not profile.threads:
        out.append("(empty profile: no threads)")
    return "\n".join(out) + "\n"


def _visible(
    node: CallNode, min_time_ns: int, top: int | None
) -> tuple[list[CallNode], list[CallNode]]:
    children = sorted(node.children.values(), key=lambda c: -c.inclusive_ns)
    shown = [c for c in children if c.inclusive_ns >= min_time_ns]
    if top is not None:
        shown = shown[: max(top, 0)]
    kept = {id(c) for c in shown}
    return shown, [c for c in children if id(c) not in kept]


def _render_thread(
    profile: CallProfile,
    root: CallNode,
    total: int,
    out: list[str],
    pal: Palette,
    width: int,
    min_time_ns: int,
    max_depth: int | None,
    top: int | None,
) -> None:
    room = width - len(_COLUMNS)
    # the indent is 2 columns per level; beyond this many levels show "[depth]" instead
    max_levels = max((room - _MIN_NAME) // 2, 1)
    # stack items: (node or a "more" summary, guides for the ancestors, is_last, depth)
    Item = tuple[CallNode | tuple[int, int, int], tuple[bool, ...], bool, int]
    stack: list[Item] = []

    def push_children(node: CallNode, guides: tuple[bool, ...], depth: int) -> None:
        shown, hidden = _visible(node, min_time_ns, top)
        items: list[Item] = [(c, guides, False, depth) for c in shown]
        if hidden:
            summary = (
                len(hidden),
                sum(c.inclusive_ns for c in hidden),
                sum(c.calls for c in hidden),
            )
            items.append((summary, guides, False, depth))
        if items:
            last = items[-1]
            items[-1] = (last[0], last[1], True, last[3])
        stack.extend(reversed(items))

    push_children(root, (), 1)
    share_base = total or 1
    while stack:
        entry, guides, is_last, depth = stack.pop()
        tree = _tree_prefix(guides, is_last, max_levels, depth)
        name_room = max(room - len(tree), 1)
        if isinstance(entry, tuple):
            count, incl, calls = entry
            cols = f"{format_ns(incl):>8} {'':>8} {100 * incl / share_base:>5.1f}% {calls:>8}  "
            label = f"… {count} more" + (" below the limit" if min_time_ns else "")
            label = label if len(label) <= name_room else label[: max(name_room - 1, 0)] + "…"
            out.append(pal.dim(cols + tree + label))
            continue
        node = entry
        share = node.inclusive_ns / share_base
        cols = (
            f"{format_ns(node.inclusive_ns):>8} {format_ns(node.exclusive_ns):>8} "
            f"{100 * share:>5.1f}% {node.calls:>8}  "
        )
        name = frame_label(profile.frames, node.frame)
        cut = max_depth is not None and depth >= max_depth and bool(node.children)
        if cut:
            name += " …"
        out.append(pal.heat(share, cols) + tree + pal.heat(share, fit(name, name_room)))
        if not cut:
            push_children(node, (*guides, not is_last), depth + 1)


def _tree_prefix(guides: tuple[bool, ...], is_last: bool, max_levels: int, depth: int) -> str:
    """Box-drawing guides for one line: ``│ `` per open ancestor, then ``├─``/``└─``.

    Past ``max_levels`` the outer guides give way to a ``[depth]`` marker, so the indent
    never grows beyond the room the name needs.
    """
    budget = 2 * (max_levels - 1)
    lead = ""
    shown = guides
    if 2 * len(guides) > budget:
        lead = f"[{depth}] "
        keep = max((budget - len(lead)) // 2, 0)
        shown = guides[len(guides) - keep :] if keep else ()
    connector = "└─ " if is_last else "├─ "
    return lead + "".join("│ " if g else "  " for g in shown) + connector
