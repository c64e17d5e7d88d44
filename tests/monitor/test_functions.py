"""The hot-function table's fast parser (C and Python loops) against a per-line reference."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from profkit.monitor import functions
from profkit.monitor.functions import MAX_DEPTH, DepthSums, FunctionTable, is_idle_wait


@pytest.fixture(autouse=True, params=["c", "python"])
def loop(request: pytest.FixtureRequest) -> Iterator[str]:
    """Every test here runs on both loops (the C one where it was built)."""
    saved = functions._native
    if request.param == "python":
        functions._native = None
    elif saved is None:
        if os.environ.get("PROFKIT_REQUIRE_NATIVE") == "1":
            pytest.fail("profkit.monitor._closes was not built")
        pytest.skip("profkit.monitor._closes was not built (no C compiler at install)")
    yield request.param
    functions._native = saved


#: The reference: one close line, matched whole (what the wire format documents).
_CLOSE = re.compile(
    r"( *)(?:Leave|Yield): ((?:(?!, Duration: ).)*), "
    r"Duration: ([0-9]{1,15}(?:\.[0-9]{1,9})?) (ns|us|µs|ms|s)"
)
_SCALE = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000}


def _reference(bodies: list[str]) -> tuple[dict[str, list[int]], int]:
    """name -> [self, count, longest], and the number of close lines, line by line (the
    total of a stream that is not a call tree has no reference: the loops' agree)."""
    table: dict[str, list[int]] = {}
    sums = [0] * (MAX_DEPTH + 2)
    closes = 0
    for body in bodies:
        for line in body.split("\n"):
            m = _CLOSE.fullmatch(line)
            if m is None:
                continue
            indent, name, value, unit = m.groups()
            ns = (
                int(value) * _SCALE[unit]
                if "." not in value
                else round(float(value) * _SCALE[unit])
            )
            closes += 1
            depth = len(indent) // 4
            own = 0
            if depth <= MAX_DEPTH:
                own = max(ns - sums[depth + 1], 0)
                sums[depth + 1] = 0
                sums[depth] += ns
            if is_idle_wait(name):
                continue
            e = table.setdefault(name, [0, 0, 0])
            e[0] += own
            e[1] += 1
            e[2] = max(e[2], ns)
    return table, closes


def _feed_all(bodies: list[str]) -> tuple[FunctionTable, int]:
    table = FunctionTable()
    sums = DepthSums()  # one sender: its depth sums carry across its datagrams
    return table, sum(table.feed(body, sums) for body in bodies)


_name = st.sampled_from(["f", "g.h", "a, b", "time.sleep", "x,", "Leave: y", ""])
_duration = st.sampled_from(
    ["12.250 us", "7 ns", "1.5 ms", "3 s", "2 µs", "x us", "1.0000000001 s"]
)
_line = st.one_of(
    st.builds(
        lambda d, k, n, v: f"{'    ' * d}{k}: {n}, Duration: {v}",
        st.integers(0, 5),
        st.sampled_from(["Leave", "Yield", "Enter", "leave"]),
        _name,
        _duration,
    ),
    st.builds(lambda d, n: f"{'    ' * d}Enter: {n}", st.integers(0, 5), _name),
    st.sampled_from(["", " Leave: f, Duration: 1 ns", "Leave: f, Duration: 1 ns, Duration: 2 ns"]),
    st.text(st.sampled_from("Leave: f, Duration: 1 ns\n"), max_size=40),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(_line, max_size=30), max_size=4))
def test_fast_parser_matches_reference(datagrams: list[list[str]]) -> None:
    bodies = ["\n".join(lines) for lines in datagrams]
    table, closes = _feed_all(bodies)
    expected, expected_closes = _reference(bodies)
    got = {name: [e[0], e[2], e[3]] for name, e in table.table.items()}
    assert (got, closes) == (expected, expected_closes)
    saved, functions._native = functions._native, None
    try:
        python_totals = {name: e[1] for name, e in _feed_all(bodies)[0].table.items()}
    finally:
        functions._native = saved
    assert {name: e[1] for name, e in table.table.items()} == python_totals


def test_depth_sums_carry_across_datagrams() -> None:
    table = FunctionTable()
    sums = DepthSums()
    table.feed("    Leave: child, Duration: 30 ns", sums)
    table.feed("Leave: parent, Duration: 100 ns", sums)
    assert table.table["parent"][0] == 70


def test_remembered_heads_follow_a_shrink() -> None:
    """After the table forgets its cooler half, a remembered head must not keep updating
    an entry that is no longer in the table."""
    table = FunctionTable(limit=4)
    table.feed("Leave: cold, Duration: 1 ns")
    for i in range(10):
        table.feed(f"Leave: hot{i}, Duration: {1000 + i} ns")
    assert "cold" not in table.table and table.forgotten
    table.feed("Leave: cold, Duration: 2 ns")
    assert table.table["cold"][:4] == [2, 2, 1, 2]
