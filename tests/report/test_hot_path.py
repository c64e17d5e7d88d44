"""Issue #11 item 3: the end-of-run tree leads to the hot spot, judged against cProfile
run on the same program in the same test (the oracle), and the tree's own rules:
folding, profkit's frames hidden, full names off a terminal, which limit hid what."""

from __future__ import annotations

import os
import pstats
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from profkit.calltree.model import CallProfile, Frame, ThreadTree
from profkit.report.text import render_tree

# A pytest-like program: a framework (installed, as pytest and pluggy are) calls the test
# through a deep chain of distinct pass-through wrappers, with a module imported inside it
# (import machinery); the program's own lambdas lead to a hot leaf reached by two paths.
# The framework's chain folds; the program's own frames never do (finding N12).
PROGRAM = textwrap.dedent(
    """
    import sys, os
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(here, "site-packages"))
    import framework

    def hot(n):
        total = 0
        for i in range(n):
            total += i * i % 7
        return total

    def warm(n):
        return sum(range(n))

    def main():
        quarter = lambda m: warm(m // 4)
        for _ in range(3):
            framework.chain(lambda m: hot(m) + quarter(m), 200_000)
        hot(100_000)

    main()
    """
)
FRAMEWORK = textwrap.dedent(
    """
    import importlib

    def make_wrappers(depth):
        fns = []
        for i in range(depth):
            ns = {}
            exec(f"def wrapper_{i}(f, n):\\n    return f(n)", ns)
            fns.append(ns[f"wrapper_{i}"])
        return fns

    WRAPPERS = make_wrappers(60)

    def chain(test, n, k=0):
        if k == len(WRAPPERS):
            mod = importlib.import_module("helper_mod")
            return mod.run(test, n)
        return WRAPPERS[k](lambda m: chain(test, m, k + 1), n)
    """
)
HELPER = "def run(f, n):\n    return f(n)\n"


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("hotpath")
    (d / "site-packages").mkdir()
    (d / "site-packages" / "helper_mod.py").write_text(HELPER)
    (d / "site-packages" / "framework.py").write_text(FRAMEWORK)
    path = d / "app.py"
    path.write_text(PROGRAM)
    return path


def _cprofile_hottest(program: Path) -> str:
    out = program.parent / "app.pstats"
    subprocess.run(
        [sys.executable, "-m", "cProfile", "-o", str(out), str(program)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    stats = pstats.Stats(str(out)).stats  # type: ignore[attr-defined]
    (filename, _line, name), _ = max(
        ((k, v) for k, v in stats.items() if k[0] != "~"), key=lambda kv: kv[1][2]
    )
    assert filename == str(program)
    return name


def test_end_of_run_tree_names_the_hot_spot_in_40_lines(program: Path) -> None:
    hottest = _cprofile_hottest(program)  # the oracle: cProfile's top by self time
    assert hottest == "hot"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "profkit",
            "run",
            "-o",
            str(program.parent / "p.json"),
            str(program),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=program.parent,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    head = "\n".join(lines[:40])
    assert re.search(rf"__main__\.{hottest}\b", head), head
    # the tree itself reaches the leaf through the folded chain within 40 lines
    tree_lines = [line for line in lines[:40] if "─ " in line]
    assert any(f"__main__.{hottest}" in line for line in tree_lines), head
    assert "frames folded" in head
    text = done.stderr
    assert "profkit." not in text.replace("profkit: profile saved", "")
    assert "contextlib.suppress" not in text
    # Import machinery stays folded ("[+N import frames]"); a frame of it may show where it
    # holds >= 1 % of the thread's own time (issue 25 item 5: hot spots count imports
    # unfolded), which on a loaded machine a module lock's __exit__ can reach: a few, never
    # the 68 folded ones.
    assert "import frames]" in text
    assert sum("importlib._bootstrap" in line for line in lines) <= 3, text
    flat = subprocess.run(
        [sys.executable, "-m", "profkit", "report", "p.json", "--view", "flat"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=program.parent,
    ).stdout
    assert "<lambda> (app.py:" in flat  # same-named functions carry file:line
    assert not re.search(r"─ …(?! \d+ more)", text)  # no name cut from the left
    assert not re.search(r"─ \S+ …$", text, re.M)  # no depth cap marker


def _chain_profile(depth: int = 50) -> CallProfile:
    p = CallProfile("trace")
    t = ThreadTree(1, "MainThread")
    p.threads.append(t)
    node = t.root
    t.root.inclusive_ns = 1000
    for i in range(depth):
        node = node.child(p.frame_id(Frame(f"pkg{i % 3}.f{i}", "x.py", i)))
        node.add_call(1000, 0)
    leaf = node.child(p.frame_id(Frame("app.leaf", "a.py", 1)))
    leaf.add_call(1000, 1000)
    return p


def test_chains_fold_and_say_how_many() -> None:
    text = render_tree(_chain_profile(), width=None, fold=True)
    assert "┆ 49 frames folded (pkg1, pkg2, pkg0)" in text
    assert "app.leaf" in text and len(text.splitlines()) < 10
    # without --fold the chain still folds between its ends, but only as a deep chain
    # (issue #22: text linear in the tree's size), naming its frames, not its packages
    unfolded = render_tree(_chain_profile(), width=None)
    assert "app.leaf" in unfolded and "pkg0.f0" in unfolded
    assert "levels folded: pkg" in unfolded and "frames folded" not in unfolded


def test_profkit_and_import_frames_hidden() -> None:
    p = CallProfile("trace")
    t = ThreadTree(1, "MainThread")
    p.threads.append(t)
    launcher = t.root.child(
        p.frame_id(Frame("profkit.profilers.elt.program.Program.run", "/x/program.py", 1))
    )
    launcher.add_call(100, 0)
    boot = launcher.child(
        p.frame_id(Frame("importlib._bootstrap._find_and_load", "<frozen importlib._bootstrap>", 1))
    )
    boot.add_call(100, 0)  # passes its time through (one that holds some stays shown)
    boot.child(p.frame_id(Frame("app.main", "/a/app.py", 3))).add_call(100, 100)
    t.root.child(
        p.frame_id(Frame("contextlib.suppress.__init__", "/usr/lib/contextlib.py", 1))
    ).add_call(1, 1)
    text = render_tree(p, width=None, fold=True)
    assert "profkit." not in text and "contextlib" not in text and "_find_and_load" not in text
    assert "app.main [+1 import frames]" not in text  # folded into the caller it stood under
    assert re.search(r"└─ app\.main", text)


def test_hidden_lines_say_which_limit() -> None:
    from tests.calltree.strategies import sample_profile

    assert "below 25% of the thread" in render_tree(sample_profile(), min_share=0.25)
    assert "below the limit (3.00 ms)" in render_tree(sample_profile(), min_time_ns=3_000_000)


def test_same_named_functions_carry_file_and_line() -> None:
    p = CallProfile("trace")
    t = ThreadTree(1, "MainThread")
    p.threads.append(t)
    for i, f in enumerate(("a.py", "b.py")):
        t.root.child(p.frame_id(Frame("m.<lambda>", f"/src/{f}", 10 + i))).add_call(5, 5)
        t.root.child(p.frame_id(Frame("m.run", f"/src/{f}", 20 + i))).add_call(5, 5)
    t.root.child(p.frame_id(Frame("m.unique", "/src/a.py", 30))).add_call(5, 5)
    text = render_tree(p, width=None)
    for label in (
        "m.<lambda> (a.py:10)",
        "m.<lambda> (b.py:11)",
        "m.run (a.py:20)",
        "m.run (b.py:21)",
    ):
        assert label in text
    assert "m.unique (" not in text


def test_hot_spots_list_functions_hot_from_many_paths() -> None:
    p = CallProfile("trace")
    t = ThreadTree(1, "MainThread")
    p.threads.append(t)
    leaf = p.frame_id(Frame("m.spread"))
    for i in range(50):  # 1 % from each of 50 callers: hidden from the tree at 2 %
        caller = t.root.child(p.frame_id(Frame(f"m.caller{i}")))
        caller.add_call(20, 10)
        caller.child(leaf).add_call(10, 10)
    text = render_tree(p, width=None, min_share=0.02, hot_spots=3)
    assert text.splitlines()[2].endswith("m.spread")


def test_folded_view_drops_summaries_too_small_to_matter() -> None:
    from tests.calltree.strategies import sample_profile

    assert "more below" in render_tree(sample_profile(), min_share=0.25)
    assert "more below" not in render_tree(sample_profile(), min_share=0.25, fold=True)


def test_import_frames_inside_a_chain_are_counted_in_the_fold() -> None:
    p = _chain_profile(10)
    t = p.threads[0]
    node = next(iter(t.root.children.values()))
    node = next(iter(node.children.values()))
    boot = p.frame_id(Frame("importlib._bootstrap._find_and_load", "<frozen importlib._bootstrap>"))
    inner = node.children.popitem()[1]
    imp = node.child(boot)
    imp.add_call(1000, 0)
    imp.children[inner.frame] = inner
    text = render_tree(p, width=None, fold=True)
    assert "┆ 10 frames folded" in text and "_find_and_load" not in text  # 9 + 1 import


def test_huge_names_are_cut_even_off_a_terminal() -> None:
    p = CallProfile("trace")
    t = ThreadTree(1, "T" * 100_000)
    p.threads.append(t)
    t.root.child(p.frame_id(Frame("m." + "x" * 1_000_000))).add_call(5, 5)
    text = render_tree(p, width=None, hot_spots=1)
    assert len(text) < 10_000 and "more characters]" in text


def test_c_functions_the_runner_called_are_hidden_at_the_root() -> None:
    p = CallProfile("trace", metadata={"profiler": "profkit.profilers.elt.profiler:EltProfiler"})
    t = ThreadTree(1, "MainThread")
    p.threads.append(t)
    main = t.root.child(p.frame_id(Frame("__main__.<module>", "/a/hi.py", 1)))
    main.add_call(50, 10)
    main.child(p.frame_id(Frame("builtins.print"))).add_call(40, 40)
    t.root.child(p.frame_id(Frame("builtins.isinstance"))).add_call(3, 3)  # the runner's
    text = render_tree(p, width=None)
    assert "builtins.print" in text and "isinstance" not in text
    p.metadata = {}  # not a profile of profkit's Python profilers: nothing assumed
    assert "isinstance" in render_tree(p, width=None)


def _user_chain_profile(script: str = "/home/u/proj/app.py") -> CallProfile:
    """A new user's app.py (finding N12): module -> g -> f -> sum(genexpr), each passing
    all its time on, below a library chain."""
    p = CallProfile("trace")
    t = ThreadTree(1, "MainThread")
    p.threads.append(t)
    t.root.inclusive_ns = 1000
    node = t.root
    for name, file in (
        ("__main__.<module>", script),
        ("lib.a", "/usr/lib/python3/site-packages/lib/a.py"),
        ("lib.b", "/usr/lib/python3/site-packages/lib/b.py"),
        ("lib.c", "/usr/lib/python3/site-packages/lib/c.py"),
        ("__main__.g", script),
        ("helpers.h", os.path.join(os.path.dirname(script), "helpers.py")),
        ("helpers.h2", os.path.join(os.path.dirname(script), "helpers.py")),
        ("helpers.h3", os.path.join(os.path.dirname(script), "helpers.py")),
        ("__main__.f", script),
        ("builtins.sum", ""),
    ):
        node = node.child(p.frame_id(Frame(name, file, 1)))
        node.add_call(1000, 0)
    node.child(p.frame_id(Frame("__main__.<genexpr>", script, 5))).add_call(1000, 1000)
    return p


def test_the_programs_own_frames_are_never_folded() -> None:
    text = render_tree(_user_chain_profile(), width=None, fold=True)
    for name in ("__main__.g", "helpers.h2", "helpers.h3", "__main__.f", "<genexpr>"):
        assert name in text, text
    assert (
        "┆ 3 frames folded (lib)" in text and "lib.b" not in text
    )  # the library chain still folds
    # -m pytest's __main__ is an installed package: its directory is not the user's
    installed = render_tree(
        _user_chain_profile("/usr/lib/python3/site-packages/x/__main__.py"), width=None, fold=True
    )
    assert "__main__.g" in installed and "__main__.f" in installed
    assert "helpers.h2" not in installed and "2 frames folded (helpers)" in installed


def test_a_dash_m_module_s_own_directory_is_the_program_s() -> None:
    # profkit run -m pkg.app: the frames are pkg.app.*, never __main__; argv[0] is the file
    p = CallProfile("trace")
    t = ThreadTree(1, "MainThread")
    p.threads.append(t)
    node = t.root
    for depth in range(8):
        node = node.child(p.frame_id(Frame(f"pkg.app.f{depth}", "/home/u/pkg/app.py", depth)))
        node.add_call(1000, 0)
    node.child(p.frame_id(Frame("pkg.app.leaf", "/home/u/pkg/app.py", 99))).add_call(1000, 1000)
    assert "frames folded" in render_tree(p, width=None, fold=True)  # no argv: a library
    p.metadata["argv"] = ["/home/u/pkg/app.py"]
    text = render_tree(p, width=None, fold=True)
    assert "frames folded" not in text and "pkg.app.f5" in text, text
    p.metadata["argv"] = ["/venv/lib/python3.11/site-packages/pkg/app.py"]  # -m pytest's kind
    assert "frames folded" in render_tree(p, width=None, fold=True)


def test_prefix_modules_are_never_folded() -> None:
    text = render_tree(_chain_profile(12), width=None, fold=True, prefix="pkg1,app")
    assert "frames folded" not in text and "pkg1.f10" in text


def test_memory_top_item_agrees_in_tree_hot_spots_and_flat() -> None:
    """Issue #25 item 5: 60.9 % of a memory profile's bytes in ``_compile_bytecode`` (the
    code objects of imported modules) was folded into the importing module by the tree,
    so its hot spots named ``<module>`` while the flat view and the HTML named the
    import frame. The hot spots and the tree now show it; pass-through import frames
    stay folded."""
    from profkit.report.flat import render_flat

    p = CallProfile("memory")
    t = ThreadTree(1, "MainThread")
    p.threads.append(t)
    ext = "<frozen importlib._bootstrap_external>"
    main = t.root.child(p.frame_id(Frame("__main__.<module>", "/a/app.py", 1)))
    main.add_call(100, 10)
    load = main.child(
        p.frame_id(Frame("importlib._bootstrap._find_and_load", "<frozen importlib._bootstrap>", 1))
    )
    load.add_call(61, 0)
    load.child(p.frame_id(Frame("importlib._bootstrap_external._compile_bytecode", ext, 2)))
    load.children[2].add_call(61, 61)
    main.child(p.frame_id(Frame("app.work", "/a/app.py", 9))).add_call(29, 29)
    t.root.inclusive_ns = 100
    text = render_tree(p, width=None, fold=True, hot_spots=3)
    spots = text.split("hot spots", 1)[1].splitlines()
    assert spots[1].split()[-1] == "importlib._bootstrap_external._compile_bytecode"
    assert "61.0%" in spots[1]
    assert re.search(r"─ importlib\._bootstrap_external\._compile_bytecode", text)
    assert "_find_and_load" not in text  # passes its bytes through: still folded
    flat = render_flat(p, width=None).splitlines()
    assert flat[2].endswith("importlib._bootstrap_external._compile_bytecode")
