"""Property: with any base time, event lines are balanced, complete and orphan-free.

Random call trees (name, time before/after children, children) are driven through the
fake collector; the lines must show exactly the calls that lasted at least the base time,
each with its Enter before its callees and its Leave after, at the right depth, and the
saved tree's self times must charge hidden callees to the nearest shown caller.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from profkit.profilers.elt import EltProfiler
from profkit.settings import Settings
from tests.profilers.elt.fake import FakeClock, FakeDriver


@dataclass
class Call:
    name: str
    before: int
    after: int
    children: list[Call]

    def duration(self) -> int:
        return self.before + self.after + sum(c.duration() for c in self.children)


calls = st.recursive(
    st.builds(
        Call,
        st.sampled_from(["app.a", "app.b"]),
        st.integers(0, 50),
        st.integers(0, 50),
        st.just([]),
    ),
    lambda kids: st.builds(
        Call,
        st.sampled_from(["app.a", "app.b", "app.c"]),
        st.integers(0, 50),
        st.integers(0, 50),
        st.lists(kids, max_size=4),
    ),
    max_leaves=25,
)


def drive(d: FakeDriver, call: Call) -> None:
    with d.call(call.name, call.before, call.after):
        for child in call.children:
            drive(d, child)


def expected_lines(call: Call, basetime: int, unit: str, depth: int = 0) -> list[str]:
    if call.duration() < basetime:
        return []
    pad = "    " * depth
    inner = [line for c in call.children for line in expected_lines(c, basetime, unit, depth + 1)]
    d = call.duration()
    shown = f"{d} ns" if unit == "ns" else f"{d / 1000:.3f} us"
    leave = f"{pad}Leave: {call.name}, Duration: {shown}"
    return [f"{pad}Enter: {call.name}", *inner, leave]


@settings(max_examples=80, deadline=None)
@given(
    top=st.lists(calls, min_size=1, max_size=3),
    basetime=st.integers(0, 200) | st.just(0),
    unit=st.sampled_from(["us", "ns"]),
)
def test_lines_are_exactly_the_long_calls_in_order(
    top: list[Call], basetime: int, unit: str
) -> None:
    clock = FakeClock()
    lines: list[str] = []
    prof = EltProfiler(
        Settings(basetime_ns=basetime, unit=unit),  # type: ignore[arg-type]
        clock=clock,
        standalone=False,
        on_line=lines.append,
    )
    d = FakeDriver(prof, clock)
    for call in top:
        drive(d, call)
    assert lines == [line for c in top for line in expected_lines(c, basetime, unit)]
    prof.shutdown()
    profile = prof.profile
    assert profile is not None
    # Self time: every shown node's exclusive = inclusive - shown children's inclusive.
    for thread in profile.threads:
        for _, node in thread.root.walk():
            if node.frame >= 0:
                kids = sum(c.inclusive_ns for c in node.children.values())
                assert node.exclusive_ns == node.inclusive_ns - kids
                assert node.calls > 0 and node.min_ns >= basetime
    shown_total = sum(c.duration() for c in top if c.duration() >= basetime)
    assert sum(t.root.inclusive_ns for t in profile.threads) == shown_total
