"""The lazily shown tree: what a copy with hidden frames removed would say, made only
where it is read; self times by frame from the nodes or the recorder's rows alike."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from profkit.calltree.model import CallNode, CallProfile, Frame, ThreadTree
from profkit.profilers.elt import native
from profkit.report.shown import Hiding, ShownNode, self_times, shown_tree
from profkit.report.text import render_tree
from profkit.report.tree import filter_tree
from tests.calltree.strategies import profiles


def _as_tuples(node: ShownNode | CallNode) -> Any:
    """(frame, calls, inclusive, exclusive, children by frame), recursively."""
    return (
        node.frame,
        node.calls,
        node.inclusive_ns,
        node.exclusive_ns,
        {f: _as_tuples(c) for f, c in node.children.items()},
    )


@settings(max_examples=150, deadline=None)
@given(profiles(max_frames=6), st.lists(st.booleans(), min_size=6, max_size=6))
def test_shown_tree_is_the_filtered_copy(profile: CallProfile, hidden: list[bool]) -> None:
    """Hidden frames (anywhere): the same tree as the copying filter (children moved up
    and merged, self time charged to the nearest shown caller), and the same self times
    by frame as summing the copy's nodes."""
    hiding = Hiding(len(profile.frames), hidden)
    for thread in profile.threads:
        copy = filter_tree(thread.root, lambda f: not hidden[f])
        shown = shown_tree(thread.root, hiding)
        got = _as_tuples(shown)
        want = _as_tuples(copy)
        assert got[1:] == want[1:]  # the root's frame: -1 for both; compare the rest
        sums: dict[int, int] = {}
        stack = list(copy.children.values())
        while stack:
            node = stack.pop()
            sums[node.frame] = sums.get(node.frame, 0) + node.exclusive_ns
            stack.extend(node.children.values())
        assert self_times(thread.root, hiding) == sums


def test_imports_are_folded_and_c_functions_hidden_at_the_root_only() -> None:
    profile = CallProfile("trace")
    main, imp, mod, cfun, hidden = (
        profile.frame_id(Frame(n, file))
        for n, file in (
            ("__main__.<module>", "m.py"),
            ("importlib._bootstrap._find_and_load", "<frozen importlib._bootstrap>"),
            ("pkg.<module>", "pkg.py"),
            ("builtins.isinstance", ""),
            ("profkit.runner.x", "x.py"),
        )
    )
    thread = ThreadTree(1, "MainThread")
    thread.root.inclusive_ns = 100
    top = thread.root.child(hidden)
    top.inclusive_ns, top.exclusive_ns = 100, 5
    c_top = top.child(cfun)
    c_top.inclusive_ns = c_top.exclusive_ns = 3
    m = top.child(main)
    m.inclusive_ns, m.exclusive_ns, m.calls = 92, 10, 1
    i = m.child(imp)
    i.inclusive_ns, i.exclusive_ns = 82, 2
    p = i.child(mod)
    p.inclusive_ns, p.exclusive_ns, p.calls = 80, 70, 1
    c_low = p.child(cfun)
    c_low.inclusive_ns = c_low.exclusive_ns = 10
    imports = [False, True, False, False, False]
    c_at_root = [False, False, False, True, False]
    hide = [False, False, False, False, True]
    hiding = Hiding(5, hide, imports, c_at_root)
    root = shown_tree(thread.root, hiding)
    assert list(root.children) == [main]  # profkit's frame and the C call it made: gone
    assert root.exclusive_ns == 5 + 3
    shown_main = root.children[main]
    assert (shown_main.exclusive_ns, shown_main.folded) == (12, 1)
    assert list(shown_main.children) == [mod]
    assert list(shown_main.children[mod].children) == [cfun]  # not at the root: shown
    assert self_times(thread.root, hiding) == {main: 12, mod: 70, cfun: 10}


class _Unread(CallNode):
    """A node whose children must never be read (a cold branch of a big tree)."""

    @property  # type: ignore[override]
    def children(self) -> dict[int, CallNode]:
        raise AssertionError("a cold branch was read")

    @children.setter
    def children(self, value: dict[int, CallNode]) -> None:
        pass


def test_the_end_of_run_tree_reads_only_what_it_prints() -> None:
    """Issue #11: the tree printed at the end of a run costs what is printed, not the
    whole tree: branches under the 2 % limit are summarised from their totals only."""
    profile = CallProfile("trace")
    hot = profile.frame_id(Frame("app.hot", "a.py", 1))
    cold = [profile.frame_id(Frame(f"app.cold{i}", "a.py", 10 + i)) for i in range(200)]
    thread = ThreadTree(1, "MainThread")
    thread.root.inclusive_ns = 10_000
    top = thread.root.child(hot)
    top.calls, top.inclusive_ns, top.exclusive_ns = 1, 10_000, 8_000
    for frame in cold:
        node = _Unread(frame, calls=1, inclusive_ns=10, exclusive_ns=10)
        top.children[frame] = node
    profile.threads.append(thread)
    text = render_tree(profile, width=None, min_share=0.02, top=8, fold=True)
    assert "app.hot" in text
    assert "… 200 more below 2% of the thread" in text


def _rows(root: CallNode) -> tuple[list[int], list[int], list[int]]:
    """(parents, frames, self times) of ``root``'s tree in pre-order, as a recorder's."""
    parents, frames, exclusive = [-1], [-1], [root.exclusive_ns]
    stack = [(child, 0) for child in reversed(root.children.values())]
    while stack:
        node, parent = stack.pop()
        parents.append(parent)
        frames.append(node.frame)
        exclusive.append(node.exclusive_ns)
        row = len(frames) - 1
        stack.extend((child, row) for child in reversed(node.children.values()))
    return parents, frames, exclusive


@settings(max_examples=200, deadline=None)
@given(
    profiles(max_frames=6),
    st.lists(st.booleans(), min_size=6, max_size=6),
    st.lists(st.booleans(), min_size=6, max_size=6),
)
def test_self_times_over_rows_are_the_row_by_row_rule(
    profile: CallProfile, hidden: list[bool], c_at_root: list[bool]
) -> None:
    """Issue #26: the rows' fast path (C functions dropped at the root found by their
    parents) gives the row-by-row rule's sums, keys in the same order, whether the
    columns are lists or the recorder's int32/int64 views."""
    from array import array

    from profkit.report.shown import _self_times_each, _self_times_rows

    hiding = Hiding(len(profile.frames), hidden, (), c_at_root)
    for thread in profile.threads:
        parents, frames, exclusive = _rows(thread.root)
        want = _self_times_each(parents, frames, exclusive, hiding)
        got = _self_times_rows(parents, frames, exclusive, hiding)
        assert list(got.items()) == list(want.items())
        views = (
            memoryview(array("i", parents)),
            memoryview(array("i", frames)),
            memoryview(array("q", exclusive)),
        )
        got = _self_times_rows(*views, hiding)
        assert list(got.items()) == list(want.items())
        if native.frame_sums is not None:  # the C pass of the row-by-row rule (rowsums.c)
            got = _self_times_rows(*views, hiding, _refusing_none(native.frame_sums))
            assert list(got.items()) == list(want.items())


def _refusing_none(frame_sums: Any) -> Any:
    """``frame_sums`` answering None where it refuses the rows, as elt/flat.py's wrapper."""

    def sums(*columns: Any) -> Any:
        try:
            return frame_sums(*columns)
        except (ValueError, OverflowError):
            return None

    return sums
