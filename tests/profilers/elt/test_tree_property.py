"""Property: the saved trace tree is exactly the model's, on every hot-path variant.

Random call sequences (functions inside and outside the namespace prefix, random times on
a fake clock) are driven through the fake collector with every combination of prefix,
base time, event lines and timeline — each selects a different ``function_enter``/
``function_leave`` variant (the plain closures, ``_enter_now``/``_leave_now``, the general
forms). The saved tree must equal a model computed from the calls:

* a call is shown when its function is inside the prefix and it lasted ≥ the base time;
* a shown call is a child of its nearest shown caller (hidden callers are skipped);
* calls/inclusive/min/max per path are the shown calls' durations;
* exclusive = inclusive − the shown children's inclusive, per node, so the time of hidden
  callees (by prefix or by base time) stays with the nearest shown caller;
* a thread's total is the sum of its top-level shown calls; the timeline has one span
  per shown call.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from profkit.calltree.model import CallProfile
from profkit.profilers.elt import EltProfiler, native
from profkit.settings import Settings
from tests.profilers.elt.fake import FakeClock, FakeDriver

#: ``*.gen`` are generators: each activation is a resume ... yield (the same model).
NAMES = ["app.a", "app.b", "app.core.c", "lib.x", "applib.y", "app.gen", "lib.gen"]


@dataclass
class Call:
    name: str
    before: int
    after: int
    children: list[Call] = field(default_factory=list)

    def duration(self) -> int:
        return self.before + self.after + sum(c.duration() for c in self.children)


calls = st.recursive(
    st.builds(Call, st.sampled_from(NAMES), st.integers(0, 40), st.integers(0, 40)),
    lambda kids: st.builds(
        Call,
        st.sampled_from(NAMES),
        st.integers(0, 40),
        st.integers(0, 40),
        st.lists(kids, max_size=4),
    ),
    max_leaves=30,
)

Stats = dict[tuple[str, ...], list[int]]  # path -> [calls, incl, excl, min, max]


def model(top: list[Call], prefix: bool, basetime: int) -> tuple[Stats, int, list[int]]:
    """Expected stats per shown path, the thread total and every shown call's duration."""
    stats: Stats = {}
    durations: list[int] = []

    def shown(call: Call) -> bool:
        in_prefix = not prefix or call.name == "app" or call.name.startswith("app.")
        return in_prefix and call.duration() >= basetime

    def nearest_shown(call: Call) -> list[Call]:
        """The shown calls directly under ``call`` once hidden ones are skipped."""
        out: list[Call] = []
        for child in call.children:
            out.extend([child] if shown(child) else nearest_shown(child))
        return out

    def visit(call: Call, path: tuple[str, ...]) -> None:
        if shown(call):
            path = (*path, call.name)
            d = call.duration()
            kids = sum(c.duration() for c in nearest_shown(call))
            entry = stats.setdefault(path, [0, 0, 0, d, d])
            entry[0] += 1
            entry[1] += d
            entry[2] += d - kids
            entry[3] = min(entry[3], d)
            entry[4] = max(entry[4], d)
            durations.append(d)
        for child in call.children:
            visit(child, path)

    for call in top:
        visit(call, ())
    total = sum(c.duration() for c in top for c in ([c] if shown(c) else nearest_shown(c)))
    return stats, total, durations


def saved(profile: CallProfile) -> tuple[Stats, int]:
    names = [f.name for f in profile.frames]
    stats: Stats = {}
    assert len(profile.threads) <= 1
    total = 0
    for thread in profile.threads:
        total = thread.root.inclusive_ns
        work = [((), thread.root)]
        while work:
            path, node = work.pop()
            kids = sum(c.inclusive_ns for c in node.children.values())
            if node.frame >= 0:
                # The per-node identity the issue asks for, stated on its own.
                assert node.inclusive_ns == node.exclusive_ns + kids
                stats[path] = [
                    node.calls,
                    node.inclusive_ns,
                    node.exclusive_ns,
                    node.min_ns,
                    node.max_ns,
                ]
            else:
                assert node.inclusive_ns == kids
            for child in node.children.values():
                work.append(((*path, names[child.frame]), child))
    return stats, total


@settings(max_examples=120, deadline=None)
@given(
    top=st.lists(calls, min_size=1, max_size=3),
    prefix=st.booleans(),
    basetime=st.sampled_from([0, 0, 1, 30, 120]),
    lines=st.booleans(),
    timeline=st.booleans(),
    unit=st.sampled_from(["us", "ns"]),
)
def test_saved_tree_matches_the_model(
    top: list[Call], prefix: bool, basetime: int, lines: bool, timeline: bool, unit: str
) -> None:
    clock = FakeClock()
    out: list[str] = []
    prof = EltProfiler(
        Settings(
            prefixes=("app",) if prefix else (),
            basetime_ns=basetime,
            timeline=timeline,
            unit=unit,  # type: ignore[arg-type]
        ),
        clock=clock,
        standalone=False,
        on_line=out.append if lines else None,
    )
    d = FakeDriver(prof, clock)

    def drive(call: Call) -> None:
        if call.name.endswith(".gen"):
            d.resume(call.name)
            clock.advance(call.before)
            for child in call.children:
                drive(child)
            clock.advance(call.after)
            d.yield_(call.name)
            return
        with d.call(call.name, call.before, call.after):
            for child in call.children:
                drive(child)

    for call in top:
        drive(call)
    prof.shutdown()
    assert prof.profile is not None
    # The C recorder takes every path (lines, timeline) when present (conftest: both ways).
    assert (prof._recorder is not None) == native.available()
    expected, total, durations = model(top, prefix, basetime)
    shown_calls = len(durations)
    got, got_total = saved(prof.profile)
    assert got == expected
    assert got_total == total
    assert prof.profile.metadata["open_calls_closed_at_end"] == 0
    if timeline:
        spans = prof.profile.spans
        assert len(spans) == shown_calls
        assert sorted(s.end_ns - s.start_ns for s in spans) == sorted(durations)
        depths = sorted(s.depth for s in spans)
        assert depths == sorted(len(p) - 1 for p, v in expected.items() for _ in range(v[0]))
    if lines:
        opened = sum(1 for line in out if line.lstrip().startswith(("Enter: ", "Resume: ")))
        closed = sum(1 for line in out if line.lstrip().startswith(("Leave: ", "Yield: ")))
        assert opened == closed == shown_calls
