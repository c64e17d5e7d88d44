"""The C recorder's 32-byte nodes (csrc/native.h): calls, min, max and the inclusive time
are 32-bit in the node, and a node whose numbers do not fit (a call of 2**32 ns or more,
calls adding up to that, a negative duration from a Python clock, 2**32 - 1 calls or more)
keeps them exactly in its thread's wide table; its function is a 32-bit index into its
thread's function table. These tests drive such nodes through every path that reads or
writes them: recording, export(), export_flat's merge of functions sharing a frame, and
its rows.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from profkit.calltree.model import CallProfile, Frame
from profkit.profilers.elt import native
from tests.profilers.elt.test_native import (
    _profiles,
    _recorder,
    assert_flat_export_is_the_general_conversion,
)

pytestmark = pytest.mark.skipif(not native.available(), reason="the C recorder is not built")

#: Durations around the 32-bit edges, and ordinary ones.
WIDE_STEPS = [0, 1, 7, 2**32 - 2, 2**32 - 1, 2**32, 2**33 + 5, 5 * 10**9]


@pytest.fixture(autouse=True)
def hot_path() -> str:
    """These tests pick their paths themselves (overrides the conftest's both-ways run)."""
    return "native"


@settings(max_examples=100, deadline=None)
@given(
    events=st.lists(
        st.tuples(
            st.sampled_from(["enter", "leave", "resume", "yield_"]),
            st.integers(0, 5),
            st.sampled_from(WIDE_STEPS),
        ),
        max_size=40,
    ),
    basetime=st.sampled_from([0, 40]),
)
def test_long_calls_give_the_pure_python_profile(
    events: list[tuple[str, int, int]], basetime: int
) -> None:
    """Calls of 2**32 ns and more, beside short ones in the same nodes: the profile is
    the pure Python recorder's, number for number."""
    fast, slow = _profiles(events, basetime)
    assert fast.frames == slow.frames
    assert [t.root for t in fast.threads] == [t.root for t in slow.threads]


@settings(max_examples=100, deadline=None)
@given(
    events=st.lists(
        st.tuples(
            st.sampled_from(["enter", "leave"]),
            st.integers(1, 6),
            st.sampled_from([*WIDE_STEPS, -3, -(2**33)]),
        ),
        max_size=40,
    ),
    frames=st.lists(st.integers(0, 3), min_size=6, max_size=6),
    basetime=st.sampled_from([0, -(2**40)]),
)
def test_wide_nodes_merge_and_export_as_the_general_conversion(
    events: list[tuple[str, int, int]], frames: list[int], basetime: int
) -> None:
    """Wide nodes (long calls; with a negative base time, negative durations from a clock
    going back) folded with narrow ones when functions share a frame: export_flat's rows
    are the general conversion's."""
    assert_flat_export_is_the_general_conversion(events, basetime, frames, end_after=3)


def test_a_call_of_five_seconds_keeps_its_exact_times() -> None:
    now = [0]
    rec = _recorder(clock=lambda: now[0])
    for step in (10, 5 * 10**9, 3):
        rec.enter(1)
        now[0] += step
        rec.leave(1)
    _, ((_, rows),) = rec.export(now[0])
    assert rows[1][2:] == (3, 10 + 5 * 10**9 + 3, 3, 5 * 10**9)


def test_calls_past_32_bits_are_counted_exactly() -> None:
    """A node at 2**32 - 3 calls goes on counting past 2**32 (in the wide table), in both
    exports, and two functions of one frame add up past 32 bits in export_flat's merge."""
    from profkit.profilers.elt.flat import tree

    now = [0]
    rec = _recorder(clock=lambda: now[0])
    rec.enter(1)
    rec._set_calls(2**32 - 3)
    now[0] += 5
    rec.leave(1)
    for _ in range(3):
        rec.enter(1)
        now[0] += 7
        rec.leave(1)
    for fid in (2, 3):
        rec.enter(fid)
        rec._set_calls(2**31 + fid)
        now[0] += 2
        rec.leave(fid)
    _, ((_, rows),) = rec.export(now[0])
    by_fid = {row[1]: row[2:] for row in rows[1:]}
    assert by_fid[1] == (2**32 + 1, 26, 5, 7)
    assert by_fid[2] == (2**31 + 3, 2, 2, 2)
    profile = CallProfile("trace")
    names = {1: "app.one", 2: "app.same", 3: "app.same"}
    rec.stop()
    _, ((_, data),) = rec.export_flat(now[0], lambda f: profile.frame_id(Frame(names[f])))
    nodes = {profile.frames[k].name: n for k, n in tree(data).children.items()}
    assert (nodes["app.one"].calls, nodes["app.one"].min_ns, nodes["app.one"].max_ns) == (
        2**32 + 1,
        5,
        7,
    )
    assert (nodes["app.same"].calls, nodes["app.same"].inclusive_ns) == (2**32 + 7, 4)


def test_short_calls_adding_up_past_32_bits_keep_their_exact_total() -> None:
    """Each call fits in 32 bits, their total does not: the node keeps the low 32 bits and
    its high part in the wide table (CARRIED), and both exports give the exact sums;
    export_flat's merge of two such functions of one frame adds past 32 bits too."""
    from profkit.profilers.elt.flat import tree

    step = 2**31 + 11
    now = [0]
    rec = _recorder(clock=lambda: now[0])
    for fid in (1, 1, 1, 2, 3, 3):
        rec.enter(fid)
        now[0] += step
        rec.leave(fid)
    rec.enter(4)  # just under the edge: stays narrow
    now[0] += 2**32 - 2
    rec.leave(4)
    _, ((_, rows),) = rec.export(now[0])
    by_fid = {row[1]: row[2:] for row in rows[1:]}
    assert by_fid[1] == (3, 3 * step, step, step)
    assert by_fid[2] == (1, step, step, step)
    assert by_fid[3] == (2, 2 * step, step, step)
    assert by_fid[4] == (1, 2**32 - 2, 2**32 - 2, 2**32 - 2)
    profile = CallProfile("trace")
    names = {1: "app.one", 2: "app.same", 3: "app.same", 4: "app.edge"}
    rec.stop()
    _, ((_, data),) = rec.export_flat(now[0], lambda f: profile.frame_id(Frame(names[f])))
    root = tree(data)
    nodes = {profile.frames[k].name: n for k, n in root.children.items()}
    assert (nodes["app.one"].calls, nodes["app.one"].inclusive_ns) == (3, 3 * step)
    assert (nodes["app.same"].calls, nodes["app.same"].inclusive_ns) == (3, 3 * step)
    assert (nodes["app.same"].min_ns, nodes["app.same"].max_ns) == (step, step)
    assert nodes["app.edge"].inclusive_ns == 2**32 - 2
    assert root.inclusive_ns == 6 * step + 2**32 - 2


def test_functions_are_told_apart_by_every_bit_of_their_id() -> None:
    """Nodes keep a 32-bit index into their thread's functions, not the id: ids equal in
    their low 32 bits (or in every bit but the top one) stay distinct functions, in both
    exports, through the function table's growth (thousands of functions)."""
    from profkit.profilers.elt.flat import tree

    base = [5, 5 + 2**32, 5 + 2**47, 5 + 2**63, 2**64 - 3]
    fids = base + [2**40 + 16 * k for k in range(5000)]
    now = [0]
    rec = _recorder(clock=lambda: now[0])
    for _ in range(2):
        for k, fid in enumerate(fids):
            rec.enter(fid)
            now[0] += 1 + k % 7
            rec.leave(fid)
    _, ((_, rows),) = rec.export(now[0])
    got = {row[1]: row[2:4] for row in rows[1:]}
    assert got == {fid: (2, 2 * (1 + k % 7)) for k, fid in enumerate(fids)}
    rec.stop()
    index = {fid: k for k, fid in enumerate(fids)}
    _, ((_, data),) = rec.export_flat(now[0], index.__getitem__)
    children = tree(data).children
    assert {k: (n.calls, n.inclusive_ns) for k, n in children.items()} == {
        k: (2, 2 * (1 + k % 7)) for k in range(len(fids))
    }


@pytest.mark.parametrize("stop", [True, False])
def test_a_carried_total_then_a_long_call_keeps_every_number(stop: bool) -> None:
    """A node whose total carried past 32 bits (short calls), then a call of 5 s (the node
    goes wide, its high part with it), then short calls again; a second node carried
    under a caller still open (export closes it): exact in both exports."""
    from profkit.profilers.elt.flat import tree

    step = 3 * 10**9  # each under 2**32 ns, two add up past it
    now = [0]
    rec = _recorder(clock=lambda: now[0])
    rec.enter(9)
    for d in (step, step, step, 5 * 10**9, 4, step):
        rec.enter(1)
        now[0] += d
        rec.leave(1)
    for _ in range(3):
        rec.enter(2)
        now[0] += step
        rec.leave(2)
    total_one = 4 * step + 5 * 10**9 + 4
    end = now[0] + 1
    _, ((_, rows),) = rec.export(end)  # closes the open call too, as export_flat would
    by_fid = {row[1]: row[2:] for row in rows[1:]}
    assert by_fid[1] == (6, total_one, 4, 5 * 10**9)
    assert by_fid[2] == (3, 3 * step, step, step)
    if stop:
        rec.stop()  # the trees are taken, not copied
    profile = CallProfile("trace")
    _, ((_, data),) = rec.export_flat(end, lambda f: profile.frame_id(Frame(f"app.f{f}")))
    (outer,) = tree(data).children.values()
    assert (outer.calls, outer.inclusive_ns) == (1, total_one + 3 * step + 1)
    nodes = {profile.frames[k].name: n for k, n in outer.children.items()}
    one, two = nodes["app.f1"], nodes["app.f2"]
    assert (one.calls, one.inclusive_ns, one.min_ns, one.max_ns) == (6, total_one, 4, 5 * 10**9)
    assert (two.calls, two.inclusive_ns, two.exclusive_ns) == (3, 3 * step, 3 * step)
    assert outer.exclusive_ns == 1
