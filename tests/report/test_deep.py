"""Issue #22 item 6: text views linear in the profile's size, however deep the tree.

The reproduction: a Python program recursing 8,000 deep printed 55 MB of tree at the end
of ``profkit run`` (each line indented by its depth), and ``profkit report`` of a 900 KB
profile needed over 1 GiB. Deep single-child chains now fold between their ends, and the
indent stops growing past :data:`MAX_LEVELS` (the depth is written as ``[N]``).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from profkit.calltree.model import CallNode, CallProfile, Frame, ThreadTree
from profkit.report.shown import KEEP_BOTTOM, KEEP_TOP, MAX_LEVELS
from profkit.report.text import render_tree
from tests.calltree.strategies import deep_profile

#: generous bytes per line of the tree: columns, a bounded indent, a short name
_LINE = 60 + 2 * MAX_LEVELS + 40


def _alternating(depth: int, branch: bool = False) -> CallProfile:
    """``a → b → a → …`` ``depth`` levels; with ``branch``, every level also calls a
    small leaf (so no chain of single children: nothing can fold)."""
    p = CallProfile("trace")
    t = ThreadTree(1, "MainThread")
    p.threads.append(t)
    a, b = p.frame_id(Frame("app.a", "x.py", 1)), p.frame_id(Frame("app.b", "x.py", 2))
    leaf = p.frame_id(Frame("app.leaf", "x.py", 3))
    node: CallNode = t.root
    for i in range(depth):
        node = node.child(b if i % 2 else a)
        node.add_call(10 * (depth - i) + 1, 1)
        if branch:
            node.child(leaf).add_call(1, 1)
    return p


def test_a_deep_chain_prints_a_bounded_tree() -> None:
    small = render_tree(deep_profile(100), width=None)
    for depth in (1_000, 8_000):
        text = render_tree(deep_profile(depth), width=None)
        assert len(text) <= len(small) + 20  # the same lines, only the numbers differ
        lines = text.splitlines()
        # the top of the chain is where the program enters it; the bottom where time goes
        assert sum("─ myapp.rec" in line for line in lines) == KEEP_TOP + KEEP_BOTTOM
        folded = depth - KEEP_TOP - KEEP_BOTTOM
        assert f"┆ {folded} levels folded: myapp.rec × {folded}" in text


def test_a_deep_tree_that_cannot_fold_keeps_a_bounded_indent() -> None:
    depth = 3_000
    text = render_tree(_alternating(depth, branch=True), width=None)
    lines = text.splitlines()
    assert len(lines) >= 2 * depth  # every node shown: nothing here is a chain
    assert max(len(line) for line in lines) <= _LINE
    assert f"[{depth}]" in text  # the depth, written where the indent stops growing
    assert len(text) <= _LINE * len(lines)


def test_a_mutual_recursion_is_named_as_its_cycle() -> None:
    text = render_tree(_alternating(1_000), width=None)
    assert "levels folded: (app.b → app.a) × " in text or "(app.a → app.b) × " in text


def test_short_chains_and_siblings_are_left_whole() -> None:
    text = render_tree(deep_profile(KEEP_TOP + KEEP_BOTTOM + 5), width=None)
    assert "folded" not in text
    both = _alternating(40)
    both.threads[0].root.child(both.frame_id(Frame("app.other", "o.py", 1))).add_call(5, 5)
    text = render_tree(both, width=None)
    assert "levels folded" in text and "└─ app.other" in text  # a sibling after the fold


def test_max_depth_cuts_a_deep_chain_at_its_depth() -> None:
    text = render_tree(deep_profile(500), width=None, max_depth=100)
    assert "[100]" in text.splitlines()[-1] or text.rstrip().endswith("myapp.rec …")
    assert "[101]" not in text and "[500]" not in text


_PROGRAM = textwrap.dedent(
    """
    import sys
    sys.setrecursionlimit(20_000)

    def f(n):
        return 0 if n == 0 else f(n - 1) + 1

    def main():
        print(f(8_000))

    main()
    """
)


def test_an_8000_deep_recursion_prints_kilobytes_not_megabytes(tmp_path: Path) -> None:
    """Before: 55 MB of tree on stderr; after: a screenful with the program's own frames
    at the top, the same for ``profkit report`` of the saved profile.

    No assertion depends on shares (a loaded machine may stall the program anywhere):
    the end-of-run tree (which hides nodes under 2 %) is checked for its size and root;
    the fold itself in ``report --all``, which hides nothing."""
    program = tmp_path / "deep.py"
    program.write_text(_PROGRAM)
    saved = tmp_path / "p.json"
    run = [sys.executable, "-m", "profkit", "run", "-o", str(saved), str(program)]
    done = subprocess.run(run, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout == "8000\n"
    assert len(done.stderr) < 20_000, len(done.stderr)
    tree = [line for line in done.stderr.splitlines() if "─ " in line]
    assert "__main__.<module>" in tree[0]
    report = [sys.executable, "-m", "profkit", "report", "--all", str(saved)]
    shown = subprocess.run(report, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert len(shown.stdout) < 20_000, len(shown.stdout)
    top = "\n".join([line for line in shown.stdout.splitlines() if "─ " in line][:5])
    assert "__main__.main" in top and "__main__.f" in top
    assert "levels folded: __main__.f × " in shown.stdout
