"""Collapsed stacks (``a;b;c 123``) for flamegraph.pl, inferno and speedscope.

One line per distinct stack with its *self* time in nanoseconds, root first. With several
threads the thread name is the first element, so per-thread flames stay apart.

Identical stacks are merged: two call paths whose names read the same (same-named
functions from different files, threads with the same name) become one line, as
flamegraph tools expect. The merge works on a tree keyed by name, so memory is bounded
by the distinct stacks, not by the output; lines are streamed.

The format repeats the whole stack on every line, so its size grows with depth times
the number of lines (a 20,000-deep recursion would need 2.4 GiB). The size is computed
before anything is written, and a profile whose output is large *because* its stacks are
very deep is refused with a clear message (see :data:`MAX_OUTPUT_BYTES`; speedscope and
HTML stay proportional to the profile). A profile big *because* it is big is written, but
the size is told first (:class:`Plan`, ``before``: ``profkit export`` says it from 100 MB
on, with what ``--min-share`` would give), and ``min_share`` folds the subtrees under a
share of the total into their caller, as flamegraph.pl's ``--minwidth`` hides them in the
picture: the file shrinks, the totals and every kept stack stay the same (issue #25
item 15: a 54 MB profile gave 3 GB).
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable
from typing import Any, BinaryIO

from profkit._record import record
from profkit.calltree.model import CallNode, CallProfile, Frame
from profkit.errors import ProfkitError

#: Collapsed output is refused when it passes both this size and
#: :data:`MAX_MEAN_LINE_BYTES` per line: big because the profile is big is fine (a 26 MB
#: pytest profile gives 1.4 GiB); big because every line repeats a very deep stack is not
#: (a 20,000-deep recursion of 860 KB would give 2.4 GiB).
MAX_OUTPUT_BYTES = 1 << 30
MAX_MEAN_LINE_BYTES = 4096
_FLUSH_BYTES = 1 << 20

# A merged node: [self_ns, {name id: child}, inclusive_ns (set by _inclusive)]
_Node = list[Any]


def _clean(name: str) -> str:
    # ';' separates frames and the last space separates the count: neither may appear in a name
    return name.replace(";", ":").replace("\n", " ").replace("\r", " ").replace(" ", "_") or "?"


class _Names:
    """Cleaned, encoded names, one id per distinct text."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}
        self.encoded: list[bytes] = []

    def __call__(self, name: str) -> int:
        return self.add(_clean(name))

    def add(self, text: str) -> int:
        """The id of ``text``, already cleaned."""
        found = self.ids.get(text)
        if found is None:
            found = self.ids[text] = len(self.encoded)
            self.encoded.append(text.encode("utf-8", "backslashreplace"))
        return found


def frame_label(frame: Frame, lines: bool) -> str:
    """The frame's text in a stack: its name, or with ``lines`` ``name (file.py:line)``
    as py-spy writes it (the file's base name: the format repeats every frame on every
    line; the line is where the function starts, the tree being keyed by function)."""
    if not (lines and frame.file):
        return _clean(frame.name)
    where = _clean(f"{os.path.basename(frame.file) or frame.file}:{frame.line}")
    return f"{_clean(frame.name)} ({where})"


def merged_stacks(
    profile: CallProfile, lines: bool = False
) -> tuple[list[bytes], dict[int, _Node]]:
    """Every thread's tree merged by displayed name: ``(names, {head: root})``.

    The head is the thread's name id when the profile has several threads (threads
    of the same name share one head), else ``-1``. ``lines``: frames read
    ``name (file:line)`` (:func:`frame_label`), so same-named functions of two files
    stay apart.
    """
    names = _Names()
    frame_ids = [names.add(frame_label(f, lines)) for f in profile.frames]
    heads: dict[int, _Node] = {}
    many = len(profile.threads) > 1
    for thread in profile.threads:
        head = names(f"thread {thread.name}") if many else -1
        root = heads.get(head)
        if root is None:
            root = heads[head] = [0, {}, 0]
        _merge(thread.root, root, frame_ids)
    return names.encoded, heads


def _merge(tree: CallNode, into: _Node, frame_ids: list[int]) -> None:
    stack: list[tuple[CallNode, _Node]] = [(tree, into)]
    pop, push = stack.pop, stack.append
    while stack:
        old, target = pop()
        kids = target[1]
        for child in old.children.values():
            nid = frame_ids[child.frame]
            node = kids.get(nid)
            if node is None:
                node = kids[nid] = [0, {}, 0]
            node[0] += child.exclusive_ns
            if child.children:
                push((child, node))


#: ``progress(stage, done, total)``: told how far a long step has gone (the CLI draws it).
Progress = Callable[[str, int, int], None]


@record(frozen=True)
class Plan:
    """What :func:`write_to` is about to write, told before the first byte (``before``):
    the caller can say the size, or stop. ``size_at(share)`` is the size in bytes with
    ``min_share=share`` (one walk of the merged tree: the caller asks only when it means
    to suggest it)."""

    size: int
    count: int  #: lines
    size_at: Callable[[float], int]


def _inclusive(heads: dict[int, _Node]) -> int:
    """Set every node's inclusive time (its subtree's self times); the total."""
    total = 0
    for root in heads.values():
        order: list[_Node] = []
        todo = [root]
        while todo:
            node = todo.pop()
            order.append(node)
            todo.extend(node[1].values())
        for node in reversed(order):
            node[2] = node[0] + sum(c[2] for c in node[1].values())
        total += root[2]
    return total


def _kept(node: _Node, cutoff: int) -> tuple[int, list[tuple[int, _Node]]]:
    """A node's self time and children once subtrees under ``cutoff`` are folded into it
    (the caller's frame keeps their time, as flamegraph.pl's ``--minwidth`` hides them
    but the caller's width stays: totals are unchanged)."""
    kids = node[1]
    if not cutoff:
        return node[0], list(kids.items())
    own = node[0]
    kept = []
    for nid, child in kids.items():
        if child[2] < cutoff:
            own += child[2]
        else:
            kept.append((nid, child))
    return own, kept


def output_size(names: list[bytes], heads: dict[int, _Node], cutoff: int = 0) -> tuple[int, int]:
    """The exact size in bytes and lines of the collapsed output, without building it
    (``cutoff``: subtrees under it folded, after :func:`_inclusive`)."""
    total = lines = 0
    for head, root in heads.items():
        base = len(names[head]) if head >= 0 else -1  # -1: no ";" before the first name
        # a thread's top frames are never folded: they have no caller to keep their time
        stack: list[tuple[int, _Node, int]] = [(nid, child, base) for nid, child in root[1].items()]
        while stack:
            nid, node, prefix = stack.pop()
            length = prefix + 1 + len(names[nid])
            own, kids = _kept(node, cutoff)
            if own > 0:
                total += length + 2 + len(str(own))
                lines += 1
            stack.extend((k, c, length) for k, c in kids)
    return total, lines


def write_to(
    profile: CallProfile,
    out: BinaryIO,
    *,
    lines: bool = False,
    min_share: float = 0.0,
    before: Callable[[Plan], None] | None = None,
    progress: Progress | None = None,
) -> None:
    """Stream the profile as collapsed stacks (UTF-8 text) to ``out``.

    ``lines``: frames as ``name (file:line)`` (``profkit export --lines``; off by default,
    since viewers merge frames by their text). ``min_share``: a fraction of the total
    time; subtrees under it are folded into their caller (off by default: the file then
    holds every stack). ``before`` is told the size before anything is written;
    ``progress`` the bytes written.
    """
    if not 0 <= min_share <= 1:
        raise ProfkitError(f"min_share must be a fraction between 0 and 1, not {min_share}")
    if progress is not None:
        progress("merging stacks", 0, 0)
    names, heads = merged_stacks(profile, lines)
    if progress is not None:
        progress("measuring the output", 0, 0)
    total = _inclusive(heads) if (min_share or before) else 0
    cutoff = _cutoff(total, min_share)
    size, count = output_size(names, heads, cutoff)
    if size > max(MAX_OUTPUT_BYTES, MAX_MEAN_LINE_BYTES * count):
        raise ProfkitError(
            f"collapsed output would be {size / 2**30:.1f} GiB in {count:,} lines (the format "
            "repeats the whole stack on every line: this profile's stacks are too deep for "
            "it): export to speedscope or html instead, which stay proportional to the profile"
        )
    if before is not None:
        before(Plan(size, count, lambda share: output_size(names, heads, _cutoff(total, share))[0]))

    def written(done: int) -> None:
        if progress is not None:
            progress("writing", done, size)

    _emit(names, heads, cutoff, out, written)


def _cutoff(total: int, share: float) -> int:
    # a subtree is folded when its time is under share x total (0: nothing is)
    return int(total * share) if share > 0 else 0


def _emit(
    names: list[bytes],
    heads: dict[int, _Node],
    cutoff: int,
    out: BinaryIO,
    written: Callable[[int], object],
) -> None:
    buf: list[bytes] = []
    pending = done = 0
    for head, root in heads.items():
        path: list[bytes] = [names[head]] if head >= 0 else []
        base = len(path)
        stack: list[tuple[int, _Node, int]] = [
            (nid, child, base) for nid, child in reversed(root[1].items())
        ]
        while stack:
            nid, node, depth = stack.pop()
            del path[depth:]
            path.append(names[nid])
            own, kids = _kept(node, cutoff)
            if own > 0:
                line = b";".join(path) + b" %d\n" % own
                buf.append(line)
                pending += len(line)
                if pending >= _FLUSH_BYTES:
                    out.write(b"".join(buf))
                    buf.clear()
                    done += pending
                    pending = 0
                    written(done)
            if kids:
                stack.extend((k, c, depth + 1) for k, c in reversed(kids))
    if buf:
        out.write(b"".join(buf))
    written(done + pending)


def write(profile: CallProfile) -> bytes:
    """The profile as collapsed stacks (UTF-8 text)."""
    out = io.BytesIO()
    write_to(profile, out)
    return out.getvalue()
