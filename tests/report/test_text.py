"""The text call tree: order, filters, width, colour, deep trees."""

from __future__ import annotations

import re

import pytest

from profkit.calltree.model import CallProfile, Frame, ThreadTree
from profkit.errors import UsageError
from profkit.report._fmt import format_ns, parse_duration
from profkit.report.text import MIN_NAME, render_tree
from tests.calltree.strategies import deep_profile, sample_profile

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _names(text: str) -> list[str]:
    return [m.group(1) for m in re.finditer(r"[└├]─ ([^\s…]\S*)", text)]


def test_tree_orders_children_by_inclusive_time() -> None:
    text = render_tree(sample_profile())
    assert _names(text) == [
        "myapp.main",
        "myapp.core.work",
        "json.dumps",
        "myapp.core.helper",
        "json.dumps",
        "myapp.core.helper",
    ]
    assert "Thread MainThread (id 1): 10.0 ms traced" in text
    assert "Thread worker (id 2)" in text
    assert "\x1b[" not in text


def test_every_line_fits_the_width_but_names_keep_40_characters() -> None:
    """Issue #11: names were cut to ~15 characters to fit 80 columns; now a line may
    wrap, a name keeps at least MIN_NAME characters, and without a width nothing is cut."""
    prof = deep_profile(300)
    prof.frames[0] = Frame("a" * 200, "x.py", 1)
    for width in (52, 60, 80, 120, 200):
        text = render_tree(prof, width=width)
        assert max(len(line) for line in text.splitlines()) <= max(width, 36 + 9 + MIN_NAME)
        names = re.findall(r"─ (…?a+)", text)
        assert names and min(len(n) for n in names) >= MIN_NAME
    assert "[299]" in render_tree(prof)
    assert ("a" * 200) in render_tree(prof, width=None)


def test_deep_tree_does_not_recurse() -> None:
    """5,000 levels render without recursion; the chain folds between its two ends
    (issue #22: it used to print every level, indented by its depth)."""
    text = render_tree(deep_profile(5000))
    assert "levels folded: myapp.rec × " in text
    assert "[5000]" in text


def test_color_only_when_asked() -> None:
    colored = render_tree(sample_profile(), color=True)
    assert "\x1b[31m" in colored
    assert _ANSI.sub("", colored) == render_tree(sample_profile())


def test_min_time_hides_and_summarises() -> None:
    text = render_tree(sample_profile(), min_time_ns=3_000_000)
    assert _names(text) == ["myapp.main", "myapp.core.work", "json.dumps", "myapp.core.helper"][:3]
    assert "… 1 more below the limit" in text  # helper under work, dumps under main


def test_top_and_max_depth() -> None:
    text = render_tree(sample_profile(), top=1)
    assert _names(text)[:3] == ["myapp.main", "myapp.core.work", "json.dumps"]
    assert "… 1 more" in text
    cut = render_tree(sample_profile(), max_depth=1)
    assert _names(cut) == ["myapp.main", "myapp.core.helper"]
    assert "myapp.main …" in cut


def test_prefix_charges_hidden_time_to_caller() -> None:
    text = render_tree(sample_profile(), prefix="myapp.core")
    lines = [line for line in text.splitlines() if "myapp.core.work" in line]
    assert len(lines) == 1
    # work keeps 8 ms total and absorbs json.dumps' 4 ms into its 2 ms self time
    assert re.search(r"8\.00 ms\s+6\.00 ms", lines[0])
    assert "json.dumps" not in text
    assert "myapp.main" not in text


def test_prefix_is_a_module_path_prefix() -> None:
    p = CallProfile("trace")
    t = ThreadTree(1, "T")
    p.threads.append(t)
    t.root.child(p.frame_id(Frame("myapplet.x"))).add_call(5, 5)
    t.root.child(p.frame_id(Frame("myapp"))).add_call(5, 5)
    assert _names(render_tree(p, prefix="myapp")) == ["myapp"]
    assert "no calls recorded under the prefix" in render_tree(p, prefix="other")


def test_empty_profile() -> None:
    assert "empty profile" in render_tree(CallProfile("sample"))


@pytest.mark.parametrize(
    ("text", "ns"),
    [
        ("1ms", 1_000_000),
        ("250us", 250_000),
        ("0.5s", 500_000_000),
        ("800", 800),
        ("2 µs", 2000),
        (".5ms", 500_000),
    ],
)
def test_parse_duration(text: str, ns: int) -> None:
    assert parse_duration(text) == ns


@pytest.mark.parametrize("text", ["", "ms", "1h", "-1ms", "1e3ms", "١ms"])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(UsageError):
        parse_duration(text)


def test_format_ns_stays_short() -> None:
    for ns in [0, 999, 1000, 99_949, 999_999, 10**9, 10**12 - 1, 10**13]:
        assert len(format_ns(ns)) <= 8


def test_min_share_is_relative_to_each_thread() -> None:
    text = render_tree(sample_profile(), min_share=0.25)
    # MainThread (10 ms): 2.5 ms limit hides helper (2 ms) and the direct json.dumps (1 ms);
    # worker (2 ms): its only node is 100 % and stays
    assert _names(text) == ["myapp.main", "myapp.core.work", "json.dumps", "myapp.core.helper"]
    assert text.count("… 1 more below 25% of the thread") == 2
