"""The monitor's total counts a recursive function once, as cProfile's cumtime (#25 item 4)."""

from __future__ import annotations

import cProfile
import itertools
import os
import pstats
import sys
from collections.abc import Callable, Iterator
from types import FrameType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from profkit.monitor import functions
from profkit.monitor.functions import DepthSums, FunctionTable
from profkit.monitor.inclusive import MAX_RECORDS


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


def _totals(lines: list[str], cuts: list[int] | None = None) -> dict[str, int]:
    """Feed one sender's lines, cut into datagrams at ``cuts``; name -> total ns."""
    table, sums = FunctionTable(), DepthSums()
    edges = [0, *sorted(cuts or []), len(lines)]
    for a, b in itertools.pairwise(edges):
        table.feed("\n".join(lines[a:b]), sums)
    return {name: entry[1] for name, entry in table.table.items()}


# A call tree: (name, own ns, children).
_tree = st.recursive(
    st.tuples(st.sampled_from("abcd"), st.integers(1, 50), st.just(())),
    lambda kids: st.tuples(st.sampled_from("abcd"), st.integers(1, 50), st.lists(kids, max_size=3)),
    max_leaves=25,
)


def _emit(
    node: tuple, depth: int, out: list[str], cumtime: dict[str, int], open_: list[str]
) -> int:
    """Lines of ``node``'s calls; adds each outermost call's duration to ``cumtime``."""
    name, own, children = node
    out.append("    " * depth + f"Enter: {name}")
    duration = own + sum(_emit(c, depth + 1, out, cumtime, [*open_, name]) for c in children)
    if depth % 3 == 2:  # a wait closes too (no entry of its own, still a close at its depth)
        out.append("    " * (depth + 1) + "Enter: time.sleep")
        out.append("    " * (depth + 1) + "Leave: time.sleep, Duration: 0 ns")
    out.append("    " * depth + f"Leave: {name}, Duration: {duration} ns")
    if name not in open_:
        cumtime[name] = cumtime.get(name, 0) + duration
    return duration


@settings(max_examples=300, deadline=None)
@given(st.lists(_tree, min_size=1, max_size=3), st.lists(st.integers(0, 400), max_size=4))
def test_total_is_cumtime_on_any_call_tree(roots: list[tuple], cuts: list[int]) -> None:
    lines: list[str] = []
    cumtime: dict[str, int] = {}
    for root in roots:
        _emit(root, 1, lines, cumtime, [])  # under a main that never closes
    assert _totals(lines, [c for c in cuts if c <= len(lines)]) == cumtime


def _fib(n: int, tick: Callable[[], None]) -> int:
    tick()
    return n if n < 2 else _fib(n - 1, tick) + _fib(n - 2, tick)


def _even(n: int, tick: Callable[[], None]) -> bool:
    tick()
    return True if n == 0 else _odd(n - 1, tick)


def _odd(n: int, tick: Callable[[], None]) -> bool:
    tick()
    return False if n == 0 else _even(n - 1, tick)


def _walk(tree: list, tick: Callable[[], None]) -> int:
    tick()
    return 1 + sum(_visit(t, tick) for t in tree)


def _visit(tree: list, tick: Callable[[], None]) -> int:
    tick()
    return _walk(tree, tick)


def _program(tick: Callable[[], None]) -> None:
    for n in range(3, 9):
        _fib(n, tick)
        _even(n, tick)
    _walk([[[], [[]]], [[[[]]]]], tick)


_OURS = {"_fib", "_even", "_odd", "_walk", "_visit", "_program"}


def test_total_equals_cprofile_cumtime_on_recursive_programs() -> None:
    """Direct, mutual and indirect recursion, on a clock the program itself advances (so
    cProfile and the lines see the same time, whatever the machine's load)."""
    now = [0]

    def tick() -> None:
        now[0] += 1000

    profiler = cProfile.Profile(timer=lambda: now[0], timeunit=1e-9)
    profiler.runcall(_program, tick)
    stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    cumtime = {func[2]: round(entry[3] * 1e9) for func, entry in stats.items() if func[2] in _OURS}

    lines: list[str] = []
    starts: list[int] = []

    def hook(frame: FrameType, event: str, arg: object) -> None:
        name = frame.f_code.co_name
        if name not in _OURS:
            return
        if event == "call":
            lines.append("    " * len(starts) + f"Enter: {name}")
            starts.append(now[0])
        elif event == "return":
            start = starts.pop()
            lines.append("    " * len(starts) + f"Leave: {name}, Duration: {now[0] - start} ns")

    sys.setprofile(hook)
    try:
        _program(tick)
    finally:
        sys.setprofile(None)
    assert cumtime["_fib"] < sum(int(x.rsplit(" ", 2)[1]) for x in lines if "Leave: _fib" in x)
    assert _totals(lines, [len(lines) // 3, len(lines) // 2]) == cumtime


def test_lost_lines_keep_records_bounded() -> None:
    """A stream with lines missing (lost datagrams) is not a call tree: the records stay
    bounded and nothing fails."""
    table, sums = FunctionTable(), DepthSums()
    for i in range(5000):
        depth = (i * 7919) % 40
        table.feed("    " * depth + f"Leave: f, Duration: {i % 13} ns", sums)
    assert all(len(r) <= 3 * MAX_RECORDS for r in sums.pending.values())
    assert table.table["f"][1] >= 0
