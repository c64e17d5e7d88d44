"""The C recorder's end-of-run export (``csrc/flat.c``, ``frames.c``, ``rowsjson.c``).

Once stopped, ``export_flat`` takes the call trees and turns them into rows in their own
memory (issue #11: the export was the run's peak memory); before, it copies them. Both
must give the same bytes as each other and as the general conversion (``export`` +
``tree.convert``), for any events — also for trees spread over many node chunks, whose
rows are moved into pre-order slot by slot. The saver writes the rows as JSON in pieces:
the pieces must make the same file as ``calltree.file.save``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from profkit.calltree.model import CallProfile, Frame
from profkit.profilers.elt import EltProfiler, flat, native
from profkit.profilers.elt.tree import convert
from profkit.settings import Settings
from tests.profilers.elt.fake import FakeClock, FakeDriver

pytestmark = pytest.mark.skipif(not native.available(), reason="the C recorder is not built")

Events = list[tuple[str, int, int]]


@pytest.fixture(autouse=True)
def hot_path() -> str:
    """These tests pick their paths themselves (overrides the conftest's both-ways run)."""
    return "native"


def _record(events: Events, basetime: int) -> tuple[Any, int]:
    """A recorder (fake clock) after ``events``, and the clock's reading."""
    assert native.Recorder is not None
    now = [0]
    rec = native.Recorder(lambda: ("t", "T"), basetime, clock=lambda: now[0])
    for kind, fid, before in events:
        now[0] += before
        getattr(rec, kind)(fid)
    return rec, now[0]


def _flat(
    rec: Any, now: int, names: Callable[[int], str], stop: bool
) -> tuple[int, list[bytes], list[int], list[Frame]]:
    """(closed, each thread's rows, the order frame_of was asked in, the frames table)."""
    asked: list[int] = []
    profile = CallProfile("trace")

    def frame_of(fid: int) -> int:
        asked.append(fid)
        return profile.frame_id(Frame(names(fid)))

    if stop:
        rec.stop()
    closed, threads = rec.export_flat(now, frame_of)
    return closed, [data for _, data in threads], asked, profile.frames


def _general(events: Events, basetime: int, now: int, names: Callable[[int], str]) -> Any:
    """The same events through export + tree.convert: (trees, frames table)."""
    rec, _ = _record(events, basetime)
    profile = CallProfile("trace")
    _, exported = rec.export(now)
    trees = [
        convert(native.tree_of(rows), profile, lambda f: Frame(names(f)), root_totals=False)
        for _, rows in exported
    ]
    return [t for t in trees if t.children], profile.frames


@settings(max_examples=200, deadline=None)
@given(
    events=st.lists(
        st.tuples(
            st.sampled_from(["enter", "leave", "resume", "yield_"]),
            st.integers(0, 7),
            st.integers(0, 50),
        ),
        max_size=80,
    ),
    shared=st.lists(st.integers(0, 3), min_size=8, max_size=8),
    basetime=st.sampled_from([0, 1, 40]),
)
def test_stopped_export_takes_the_trees_and_gives_the_same_rows(
    events: Events, shared: list[int], basetime: int
) -> None:
    """After stop() the trees are flattened in place: the same bytes, closed count and
    frame order as a running recorder's copy; the general conversion agrees; the trees
    are used up, and later events are not recorded."""
    running, now = _record(events, basetime)
    stopped, _ = _record(events, basetime)

    def names(fid: int) -> str:
        return f"app.f{shared[fid]}"  # several functions share a frame: merges

    live = _flat(running, now + 7, names, stop=False)
    taken = _flat(stopped, now + 7, names, stop=True)
    assert taken == live
    # the running recorder still holds its trees: the same rows again (nothing open now)
    assert _flat(running, now + 9, names, stop=False)[1] == live[1]
    trees, general_frames = _general(events, basetime, now + 7, names)
    assert [flat.tree(data) for data in taken[1]] == trees
    assert taken[3] == general_frames
    stopped.enter(1)
    stopped.leave(1)
    assert stopped.export_flat(now + 20, lambda f: 0) == (0, [])


class _Many:
    """A ``frame_of`` with ``many``: the export asks it once, for every function."""

    def __init__(self, answer: Callable[[list[int]], Any]) -> None:
        self.answer = answer
        self.asked: list[list[int]] = []

    def __call__(self, fid: int) -> int:
        raise AssertionError("asked one by one")

    def many(self, fids: list[int]) -> Any:
        self.asked.append(list(fids))
        return self.answer(fids)


def test_frame_of_many_is_asked_once_in_the_one_by_one_order() -> None:
    """``frame_of.many(fids)``: every function in one call, in the order (and with the
    rows) of one call a function (csrc/frames.c)."""
    events = _wide_events(60)
    one, now = _record(events, 0)
    both, _ = _record(events, 0)
    asked: list[int] = []

    def frame_of(fid: int) -> int:
        asked.append(fid)
        return fid % 5

    _, rows = one.export_flat(now, frame_of)
    many = _Many(lambda fids: [fid % 5 for fid in fids])
    _, rows_many = both.export_flat(now, many)
    assert many.asked == [asked]
    assert [data for _, data in rows_many] == [data for _, data in rows]


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        (lambda fids: [0] * (len(fids) - 1), ValueError),  # one short
        (lambda fids: [-1] * len(fids), ValueError),
        (lambda fids: 7, TypeError),  # not a sequence
        (lambda fids: ["x"] * len(fids), TypeError),
    ],
)
def test_frame_of_many_answers_are_checked(answer: Callable[[list[int]], Any], error: type) -> None:
    rec, now = _record([("enter", 1, 1), ("enter", 2, 1)], 0)
    with pytest.raises(error):
        rec.export_flat(now, _Many(answer))


def _wide_events(paths: int) -> Events:
    """Calls down ``paths`` distinct paths three levels deep, revisiting earlier subtrees
    later (so creation order is not pre-order), over several thousand nodes."""
    events: Events = []
    for i in range(paths):
        for top in (i % 7, (i * 5) % 7):  # an earlier top node gets a new grandchild
            events += [("enter", 100 + top, 1), ("enter", 200 + i % 53, 2)]
            events += [("enter", 1000 + i, 1), ("leave", 1000 + i, 3)]
            events += [("leave", 200 + i % 53, 1), ("leave", 100 + top, 1)]
    events.append(("enter", 100, 1))  # left open: closed by the export
    return events


@pytest.mark.parametrize("stop", [True, False])
def test_many_chunks_of_nodes_give_the_general_rows(stop: bool) -> None:
    """Trees over several node chunks (1024 nodes each), with functions sharing frames
    at every level: rows moved into pre-order across chunks, as convert() builds them."""
    events = _wide_events(3000)

    def name(fid: int) -> str:
        return f"app.f{fid % 97 if fid >= 1000 else fid % 3 if fid < 200 else fid % 11}"

    rec, now = _record(events, 0)
    closed, (data,), _, frames = _flat(rec, now + 5, name, stop)
    assert closed == 1
    (tree,), general_frames = _general(events, 0, now + 5, name)
    assert frames == general_frames
    assert flat.counts(data)[0] > 3 * 1024 // 8  # several chunks' worth, merged
    assert flat.tree(data) == tree


def test_an_export_running_python_refuses_a_second_one() -> None:
    """frame_of runs Python code; an export started meanwhile must not take the trees."""
    rec, now = _record([("enter", 1, 0), ("leave", 1, 5)], 0)
    rec.stop()
    seen: list[str] = []

    def frame_of(fid: int) -> int:
        with pytest.raises(RuntimeError, match="another export"):
            rec.export_flat(now, lambda f: 0)
        seen.append("refused")
        return 0

    _, ((_, data),) = rec.export_flat(now, frame_of)
    assert seen == ["refused"] and flat.counts(data) == (2, 0)


def test_frame_indices_fit_the_int32_column() -> None:
    """The rows keep frame indices in 32 bits: the largest fits, one more is refused
    (never cut short into another frame's index)."""
    rec, now = _record([("enter", 1, 0), ("leave", 1, 5)], 0)
    _, ((_, data),) = rec.export_flat(now, lambda f: 2**31 - 1)
    assert [row[1] for row in flat.unpack(data)] == [-1, 2**31 - 1]
    with pytest.raises(ValueError, match="frame index"):
        rec.export_flat(now, lambda f: 2**31)


def test_rows_are_stored_column_by_column() -> None:
    """pack/unpack (flat.py) and the C export agree on the layout: a header, int64 columns,
    then 32-bit ones, 40 bytes a row."""
    rec, now = _record([("enter", 1, 0), ("enter", 2, 3), ("leave", 2, 4), ("leave", 1, 5)], 0)
    _, ((_, data),) = rec.export_flat(now, lambda f: f + 10)
    rows = [(-1, -1, 0, 12, 0, 0, 0, 3), (0, 11, 1, 12, 8, 12, 12, 2), (1, 12, 1, 4, 4, 4, 4, 1)]
    assert flat.unpack(data) == rows
    assert data == flat.pack(rows) and len(data) == 16 + 3 * flat.ROW_BYTES == 16 + 3 * 40
    assert native.rows_json is not None
    assert native.rows_json(data) == b"[-1,-1,0,12,0,0,0],[0,11,1,12,8,12,12],[1,12,1,4,4,4,4]"


int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
#: parent and frame (int32), calls, incl, excl, min, max (int64), subtree size (int32)
row = st.tuples(int32, int32, *[int64] * 5, int32)


@settings(max_examples=100, deadline=None)
@given(rows=st.lists(row, max_size=40), cuts=st.lists(st.integers(-3, 45), max_size=5))
def test_rows_json_pieces_join_into_the_whole_text(
    rows: list[tuple[int, ...]], cuts: list[int]
) -> None:
    """Any ranges (clamped like slices of a list, never past the rows) cover the rows
    once: their texts joined by commas are the text of all rows."""
    rows_json = native.rows_json
    assert rows_json is not None
    data = bytes(flat.pack(rows))
    whole = rows_json(data)
    assert whole == rows_json(data, 0, None)
    bounds = sorted({0, len(rows), *(min(max(c, 0), len(rows)) for c in cuts)})
    pieces = [rows_json(data, a, b) for a, b in itertools.pairwise(bounds)]
    assert b",".join(p for p in pieces if p) == whole
    assert rows_json(data, 50, 10) == b"" and rows_json(data, -5, 0) == b""


@settings(max_examples=100, deadline=None)
@given(rows=st.lists(row, max_size=40))
def test_rows_of_any_numbers_round_trip_through_the_layout(rows: list[tuple[int, ...]]) -> None:
    """Calls, min and max of any int64 (past 32 bits: the wide rows after the columns)
    come back as they went in, through flat.py (unpack, a tree's node) and through the C
    readers (rows_json's text is the saved file's JSON of them)."""
    data = flat.pack(rows)
    assert flat.counts(data) == (len(rows), sum(not _narrow(r) for r in rows))
    assert flat.unpack(data) == rows
    assert native.rows_json is not None
    text = ",".join("[" + ",".join(map(str, r[:7])) + "]" for r in rows)
    assert native.rows_json(bytes(data)) == text.encode()
    if rows:
        root = flat.tree(data)
        assert (root.calls, root.min_ns, root.max_ns) == (rows[0][2], rows[0][5], rows[0][6])


def _narrow(r: tuple[int, ...]) -> bool:
    return r[2] != flat.WIDE_ROW and all(0 <= v < 2**32 for v in (r[2], r[5], r[6]))


def test_a_large_tree_saves_in_pieces_as_the_file_module_saves(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Several JSON pieces per thread (small pieces here): the same file as
    ``calltree.file.save`` writes from the nodes."""
    from profkit.calltree import file, stream_writer

    monkeypatch.setattr(flat, "JSON_ROWS", 7)
    clock = FakeClock()
    prof = EltProfiler(Settings(), clock=clock, standalone=False)
    d = FakeDriver(prof, clock)
    for i in range(40):
        with d.call(f"app.main{i % 5}", before=3):
            d.leaf(f"app.f{i % 9}", 10 + i)
    prof.shutdown()
    assert prof.profile is not None
    root = prof.profile.threads[0].root
    assert len(list(root.flat_json() or [])) > 3  # type: ignore[attr-defined]
    stream_writer.save(prof.profile, tmp_path / "stream.json")
    file.save(prof.profile, tmp_path / "file.json")
    assert (tmp_path / "stream.json").read_bytes() == (tmp_path / "file.json").read_bytes()


def test_shutdown_stops_the_recorder() -> None:
    """The profiler's shutdown stops its recorder (so the export takes the trees): calls
    after it are not recorded, and the profile keeps what was."""
    clock = FakeClock()
    prof = EltProfiler(Settings(), clock=clock, standalone=False)
    d = FakeDriver(prof, clock)
    d.leaf("app.f", 10)
    recorder = prof._recorder
    prof.shutdown()
    assert prof.profile is not None and len(prof.profile.threads) == 1
    recorder.enter(1)
    recorder.leave(1)
    assert recorder.export_flat(10**6, lambda f: 0) == (0, [])


def test_the_stopped_export_holds_no_copy_of_the_tree() -> None:
    """After stop() the export's peak is the tree plus its rows, and no more (the node
    table is freed first, each chunk freed behind its copy); a running recorder's export
    also holds a copy of the tree, which the bound would catch. Allocations, not RSS:
    tracemalloc sees the rows and the recorder's PyMem blocks; the node chunks (mapped on
    their own) are counted by the extension."""
    import tracemalloc

    from profkit.profilers.elt import _native

    tracemalloc.start()
    try:
        results = []
        for stop in (True, False):
            rec, now = _record(
                [
                    ev
                    for p in range(1, 101)
                    for ev in [("enter", p, 1)]
                    + [e for c in range(1000, 1300) for e in (("enter", c, 1), ("leave", c, 1))]
                    + [("leave", p, 1)]
                ],
                0,
            )
            before = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
            chunks_before, _ = _native._chunks()
            if stop:
                rec.stop()
            _, ((_, data),) = rec.export_flat(now, lambda f: f)
            _, chunks_peak = _native._chunks()
            results.append(
                (
                    tracemalloc.get_traced_memory()[1] - before,
                    chunks_peak - chunks_before,
                    len(data),
                )
            )
            del rec
    finally:
        tracemalloc.stop()
    (taken, taken_chunks, rows), (_, copied_chunks, _) = results
    assert rows == flat.HEADER_BYTES + 30_101 * flat.ROW_BYTES
    assert taken <= rows + 512 * 1024, (taken, rows)
    assert taken_chunks == 0
    assert copied_chunks == 30  # the tree's 30,100 nodes, copied: the bound tells them apart
