"""Flat and callers views, and the per-function/edge statistics behind them (and pstats)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings

from profkit.calltree.model import CallProfile
from profkit.errors import UsageError
from profkit.report.flat import find_functions, profile_stats, render_callers, render_flat
from profkit.report.stats import ROOT, collect
from profkit.report.tree import copy_tree, filter_tree, merged_root
from tests.calltree.strategies import deep_profile, profiles, sample_profile


def _by_name(p: CallProfile) -> dict[str, tuple[int, int, int]]:
    stats = profile_stats(p)
    return {
        p.frames[f].name: (t.calls, t.inclusive_ns, t.exclusive_ns)
        for f, t in stats.functions.items()
    }


def test_function_totals_over_threads() -> None:
    assert _by_name(sample_profile()) == {
        "myapp.main": (1, 10_000_000, 1_000_000),
        "myapp.core.work": (2, 8_000_000, 2_000_000),
        "json.dumps": (2, 5_000_000, 5_000_000),
        "myapp.core.helper": (2, 4_000_000, 4_000_000),
    }


def test_recursion_counted_once_in_inclusive() -> None:
    stats = collect(t.root for t in deep_profile(100).threads)
    (t,) = stats.functions.values()
    assert (t.calls, t.primitive_calls, t.inclusive_ns, t.exclusive_ns) == (100, 1, 100, 100)
    assert stats.edges[(ROOT, 0)].calls == 1 and stats.edges[(0, 0)].calls == 99


def test_prefix_filter_moves_time_to_caller() -> None:
    p = sample_profile()
    got = {
        p.frames[f].name: (t.calls, t.inclusive_ns, t.exclusive_ns)
        for f, t in profile_stats(p, "myapp").functions.items()
    }
    assert got["myapp.main"] == (1, 10_000_000, 2_000_000)  # + the direct json.dumps
    assert got["myapp.core.work"] == (2, 8_000_000, 6_000_000)
    assert "json.dumps" not in got


def test_render_flat_sorted_and_fits() -> None:
    text = render_flat(sample_profile(), width=60)
    names = [line.split()[-1] for line in text.splitlines()[2:]]
    assert names == ["json.dumps", "myapp.core.helper", "myapp.core.work", "myapp.main"]
    assert max(len(line) for line in text.splitlines()) <= 60
    by_total = render_flat(sample_profile(), sort="inclusive", top=1, min_time_ns=1)
    assert by_total.splitlines()[2].endswith("myapp.main") and "3 more" in by_total


def test_callers_and_callees() -> None:
    text = render_callers(sample_profile(), "json.dumps")
    called_by, calls = text.split("called by:")[1].split("calls:")
    assert "myapp.core.work" in called_by and "myapp.main" in called_by
    assert "(nothing)" in calls
    assert "<thread start>" in render_callers(sample_profile(), "helper")


def test_find_functions_order_of_preference() -> None:
    p = sample_profile()
    assert [p.frames[i].name for i in find_functions(p, "work")] == ["myapp.core.work"]
    assert [p.frames[i].name for i in find_functions(p, "myapp.core")] == [
        "myapp.core.helper",
        "myapp.core.work",
    ]
    assert find_functions(p, "zzz") == []
    with pytest.raises(UsageError):
        render_callers(p, "zzz")


@settings(max_examples=40, deadline=None)
@given(profiles())
def test_tree_transforms_preserve_totals(p: CallProfile) -> None:
    for t in p.threads:
        assert copy_tree(t.root) == t.root
        flat = filter_tree(t.root, lambda _f: False)
        assert not flat.children
        total_excl = sum(n.exclusive_ns for n in _nodes(t.root))
        assert flat.exclusive_ns == total_excl
    merged = merged_root(t.root for t in p.threads)
    assert merged.inclusive_ns == sum(t.root.inclusive_ns for t in p.threads)
    render_flat(p)


def _nodes(root):  # type: ignore[no-untyped-def]
    stack = [root]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(n.children.values())


def test_sampled_profiles_count_samples_not_calls() -> None:
    """A sampled profile's count column said "calls" though it counts samples."""
    from profkit.report.text import render_tree

    profile = sample_profile()
    profile.mode = "sample"
    assert " samples  function" in render_flat(profile)
    assert " samples  function" in render_tree(profile)
    assert "2 samples," in render_callers(profile, "work")
    profile.mode = "trace"
    assert "   calls  function" in render_flat(profile) and "2 calls," in render_callers(
        profile, "work"
    )


@settings(max_examples=100, deadline=None)
@given(profiles(max_frames=3))
def test_functions_without_edges_are_the_same_totals(profile: CallProfile) -> None:
    """The flat view's edge-less walk (#25 item 15: memory) counts as the full one,
    recursion included (few frames: paths revisit them)."""
    roots = [t.root for t in profile.threads]
    full, light = collect(roots), collect(roots, edges=False)
    assert light.functions == full.functions and light.total_ns == full.total_ns
    assert light.edges == {}
    deep = [t.root for t in deep_profile(500).threads]
    assert collect(deep, edges=False).functions == collect(deep).functions
