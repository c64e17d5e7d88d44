"""Event lines and the timeline from the C recorder are the pure Python path's, exactly.

The same arbitrary enter/leave/resume/yield sequences — unmatched leaves, leaves of a
deeper frame (missed leaves closed at once), generators — go through both hot paths with
event lines on (base time 0 takes the write-at-once path, > 0 the held-Enter path), in µs
and ns, with and without the timeline; the written lines, the spans and the trees must be
identical. Lines whose function name is not ASCII exercise the C line builder's widths.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from profkit.calltree.model import CallProfile
from profkit.profilers.elt import EltProfiler, native
from profkit.settings import Settings
from tests.profilers.elt.fake import FakeClock, FakeDriver

pytestmark = pytest.mark.skipif(not native.available(), reason="the C recorder is not built")

NAMES = ["app.f0", "app.f1", "app.naïve", "app.函数", "app.f4", "app.\U0001f600"]


@pytest.fixture(autouse=True)
def hot_path() -> str:
    """These tests pick their paths themselves (overrides the conftest's both-ways run)."""
    return "both"


def _drive(
    events: list[tuple[str, int, int]], basetime: int, unit: str, timeline: bool, use_native: bool
) -> tuple[list[str], CallProfile]:
    clock = FakeClock()
    lines: list[str] = []
    prof = EltProfiler(
        Settings(
            basetime_ns=basetime,
            unit=unit,  # type: ignore[arg-type]
            timeline=timeline,
            native="auto" if use_native else "off",
        ),
        clock=clock,
        standalone=False,
        on_line=lines.append,
    )
    d = FakeDriver(prof, clock)
    assert (prof._recorder is not None) == use_native
    for kind, which, before in events:
        clock.advance(before)
        getattr(d, kind)(NAMES[which])
    prof.shutdown()
    assert prof.profile is not None
    return lines, prof.profile


@settings(max_examples=250, deadline=None)
@given(
    events=st.lists(
        st.tuples(
            st.sampled_from(["enter", "enter", "leave", "leave", "resume", "yield_"]),
            st.integers(0, 5),
            st.integers(0, 3000),
        ),
        max_size=50,
    ),
    basetime=st.sampled_from([0, 1, 500, 2000]),
    unit=st.sampled_from(["us", "ns"]),
    timeline=st.booleans(),
)
def test_lines_spans_and_trees_equal_the_pure_python_path(
    events: list[tuple[str, int, int]], basetime: int, unit: str, timeline: bool
) -> None:
    fast_lines, fast = _drive(events, basetime, unit, timeline, True)
    slow_lines, slow = _drive(events, basetime, unit, timeline, False)
    assert fast_lines == slow_lines
    assert fast.frames == slow.frames
    assert [t.root for t in fast.threads] == [t.root for t in slow.threads]
    assert fast.spans == slow.spans
    assert fast.metadata.get("timeline_spans_dropped") == slow.metadata.get(
        "timeline_spans_dropped"
    )


def test_the_article_format_from_c() -> None:
    lines, _ = _drive(
        [("enter", 0, 0), ("enter", 2, 1000), ("leave", 2, 3092), ("leave", 0, 120811)],
        0,
        "us",
        False,
        True,
    )
    assert lines == [
        "Enter: app.f0",
        "    Enter: app.naïve",
        "    Leave: app.naïve, Duration: 3.092 us",
        "Leave: app.f0, Duration: 124.903 us",
    ]


def test_a_failing_name_lookup_is_an_error_of_the_call_not_a_crash() -> None:
    assert native.Recorder is not None
    rec = native.Recorder(lambda: "t", emit=print, name=lambda fid: 1 / 0)  # type: ignore[misc]
    with pytest.raises(ZeroDivisionError):
        rec.enter(1)
    rec2 = native.Recorder(lambda: "t", emit=print, name=lambda fid: 42)  # type: ignore[misc]
    with pytest.raises(TypeError, match="str"):
        rec2.enter(1)


def test_timeline_cap_counts_the_rest() -> None:
    assert native.Recorder is not None
    rec = native.Recorder(lambda: "t", span_cap=2)  # type: ignore[misc]
    for _ in range(5):
        rec.enter(1)
        rec.leave(1)
    rec.enter(2)  # still open: closed by export, and counted as a span too
    rec.export(2**62)
    spans, dropped = rec.spans()
    assert len(spans) == 2 and dropped == 4


def _hostile_recorder(action: str, basetime: int) -> Any:
    """A recorder whose line sink calls back into it (the worst a callback could do)."""
    assert native.Recorder is not None
    box: list[Any] = []
    lines: list[str] = []
    now = [0]
    busy: list[bool] = []

    def emit(line: str) -> None:
        lines.append(line)
        rec = box[0]
        if len(lines) % 3 == 0 and not busy:  # its own nested lines do not call back again
            busy.append(True)
            try:
                act(rec)
            finally:
                busy.clear()

    def act(rec: Any) -> None:
        if action == "export":
            rec.export(now[0])
        elif action == "nest":
            rec.enter(999)
            rec.leave(999)
        elif action == "quiet":
            rec.quiet_this_thread()
        elif action == "deep" and len(lines) < 40:  # a few times, or resync never ends
            for _ in range(200):  # grows (reallocates) the frame array
                rec.enter(998)

    def clock() -> int:
        now[0] += 7
        return now[0]

    rec = native.Recorder(  # type: ignore[misc]
        lambda: "t", basetime, clock=clock, emit=emit, name=str, span_cap=1000
    )
    box.append(rec)
    return rec


@pytest.mark.parametrize("action", ["export", "nest", "quiet", "deep"])
@pytest.mark.parametrize("basetime", [0, 20])
def test_a_sink_that_calls_back_into_the_recorder_corrupts_nothing(
    action: str, basetime: int
) -> None:
    """Re-entry from the line sink: any result is acceptable, a crash or bad memory is not
    (run under AddressSanitizer as described in docs/elt.md to see the latter)."""
    rec = _hostile_recorder(action, basetime)
    for round_ in range(30):
        for fid in (1, 2, 3):
            rec.enter(fid)
        rec.leave(2)  # resync: closes 3 first
        rec.resume(4)
        rec.yield_(4)
        rec.leave(1)
        if round_ % 7 == 0:
            rec.leave(5)  # matches nothing
    closed, threads = rec.export(10**9)
    spans, dropped = rec.spans()
    assert closed >= 0 and dropped >= 0
    for _token, rows in threads:
        native.tree_of(rows)
    assert all(len(span) == 5 for span in spans)
