"""Pure transforms on call trees used by reports and exporters (no printing, no recursion).

Each function takes nodes and returns new nodes; inputs are never modified. Iterative on
purpose: a recursive program's tree can be deeper than Python's recursion limit.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator

from profkit.api.names import prefix_matches, split_prefixes
from profkit.calltree.model import CallNode, CallProfile, Frame


def parse_prefixes(prefix: str | Iterable[str] | None) -> tuple[str, ...]:
    """``"myapp,lib.core"`` (or a list) → ``("myapp", "lib.core")``; empty means keep all
    (:func:`profkit.api.names.split_prefixes`; a report forgives a trailing dot)."""
    return tuple(p.rstrip(".") for p in split_prefixes(prefix) if p.rstrip("."))


def matches(name: str, prefixes: tuple[str, ...]) -> bool:
    """Module-path prefix match: ``myapp`` keeps ``myapp`` and ``myapp.x``, not ``myapplet``
    (the one rule, :func:`profkit.api.names.prefix_matches`, that capture also applies)."""
    return prefix_matches(name, prefixes)


def merge_into(target: CallNode, node: CallNode) -> None:
    """Add ``node``'s own statistics (not its children) to ``target``.

    ``min_ns`` of a node without calls means nothing, so it only wins over a target
    that has no calls either (which makes merging into a fresh node an exact copy).
    """
    if node.calls and target.calls:
        target.min_ns = min(target.min_ns, node.min_ns)
    elif not target.calls:
        target.min_ns = node.min_ns if node.calls else max(target.min_ns, node.min_ns)
    target.max_ns = max(target.max_ns, node.max_ns)
    target.calls += node.calls
    target.inclusive_ns += node.inclusive_ns
    target.exclusive_ns += node.exclusive_ns


def copy_tree(root: CallNode) -> CallNode:
    """A deep copy of ``root``."""
    return filter_tree(root, lambda _f: True)


def filter_tree(root: CallNode, keep: Callable[[int], bool]) -> CallNode:
    """A copy of ``root`` without the nodes whose frame ``keep(frame)`` rejects.

    A hidden node's children move up to its nearest shown ancestor (merged with any
    same-frame sibling there) and its own time is charged to that ancestor's exclusive
    time: the same rule the ELT profiler applies at capture time.
    """
    new_root = CallNode(-1)
    merge_into(new_root, root)
    stack: list[tuple[CallNode, CallNode]] = [(root, new_root)]
    while stack:
        old, target = stack.pop()
        for child in old.children.values():
            if keep(child.frame):
                shown = target.child(child.frame)
                merge_into(shown, child)
                stack.append((child, shown))
            else:
                target.exclusive_ns += child.exclusive_ns
                stack.append((child, target))
    return new_root


def filter_prefix(profile: CallProfile, root: CallNode, prefixes: tuple[str, ...]) -> CallNode:
    """``root`` keeping only frames under the module prefixes (all of them when empty)."""
    if not prefixes:
        return root
    frames = profile.frames
    keep = [matches(f.name, prefixes) for f in frames]
    return filter_tree(root, lambda f: keep[f])


def merged_root(roots: Iterable[CallNode]) -> CallNode:
    """One tree summing several (e.g. every thread), paths merged by frame."""
    out = CallNode(-1)
    for root in roots:
        merge_into(out, root)
        stack = [(root, out)]
        while stack:
            old, target = stack.pop()
            for child in old.children.values():
                node = target.child(child.frame)
                merge_into(node, child)
                stack.append((child, node))
    return out


def total_ns(root: CallNode) -> int:
    """The time a tree covers: the root's, or its children's sum when the root is unset."""
    return root.inclusive_ns or sum(c.inclusive_ns for c in root.children.values())


def walk_stack(root: CallNode) -> Iterator[tuple[CallNode, list[int]]]:
    """Pre-order ``(node, frames above it)`` below ``root`` (the root itself is not
    yielded), without recursion and without copying the path.

    The list is *shared*: it is the current stack, valid only until the next item. That
    keeps a walk linear in the tree; copying the path per node (as :func:`walk` does)
    made exports quadratic in depth (a 20,000-deep recursion took 9.7 GB to export).
    """
    path: list[int] = []
    stack: list[tuple[CallNode, int]] = [(c, 0) for c in reversed(root.children.values())]
    pop, extend = stack.pop, stack.extend
    while stack:
        node, depth = pop()
        del path[depth:]
        yield node, path
        if node.children:
            path.append(node.frame)
            extend((c, depth + 1) for c in reversed(node.children.values()))


def walk(root: CallNode) -> Iterator[tuple[int, CallNode, tuple[int, ...]]]:
    """Pre-order ``(depth, node, path of frames above it)`` without recursion.

    Each path is a copy (quadratic in depth over a whole tree): exporters use
    :func:`walk_stack`."""
    stack: list[tuple[int, CallNode, tuple[int, ...]]] = [(0, root, ())]
    while stack:
        depth, node, path = stack.pop()
        yield depth, node, path
        below = (*path, node.frame) if node.frame >= 0 else path
        stack.extend((depth + 1, c, below) for c in reversed(node.children.values()))


def display_names(profile: CallProfile) -> list[str]:
    """Each frame's name for people: ``file:line`` added where the name alone is
    ambiguous (``<lambda>``, ``<listcomp>``, ``<module>``; two functions of one name)."""
    counts: dict[str, int] = {}
    for f in profile.frames:
        counts[f.name] = counts.get(f.name, 0) + 1
    out = []
    for f in profile.frames:
        name = f.name
        if f.file and (name.endswith(">") or counts[name] > 1):
            where = os.path.basename(f.file) or f.file
            name = f"{name} ({where}:{f.line})"
        out.append(name)
    return out


def frame_label(frames: list[Frame], index: int) -> str:
    """A frame's display name; the root shows as ``<root>``."""
    return frames[index].name if 0 <= index < len(frames) else "<root>"
