"""Exports proportional to the profile (issue #17 item 4, #11 item 4): deep recursion,
merged stacks, one process per pid, no partially overlapping Chrome events."""

from __future__ import annotations

import json
import tracemalloc
from decimal import Decimal

import pytest

from profkit.calltree import file
from profkit.calltree.model import CallProfile, Frame, ThreadTree
from profkit.errors import ProfkitError
from profkit.export import chrome, collapsed, html, pprof, pstats, speedscope
from tests.calltree.strategies import deep_profile, sample_profile

DEPTH = 20_000


@pytest.fixture(scope="module")
def deep() -> CallProfile:
    return deep_profile(DEPTH)


@pytest.mark.parametrize("module", [speedscope, chrome, html, pstats])
def test_deep_recursion_exports_in_linear_memory(deep: CallProfile, module: object) -> None:
    """20,000 deep: speedscope took 2.6 GB and wrote 401 MB; now a few MB."""
    tracemalloc.start()
    try:
        data = module.write(deep)  # type: ignore[attr-defined]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(data) < 200 * DEPTH
    assert peak < 60 << 20


@pytest.mark.parametrize("module", [collapsed, pprof])
def test_formats_that_repeat_stacks_refuse_very_deep_ones(
    deep: CallProfile, module: object
) -> None:
    """Collapsed and pprof repeat the whole stack per line/sample (quadratic in depth):
    refused with a clear message, before any memory is spent (was 5.8 GB + MemoryError)."""
    tracemalloc.start()
    try:
        with pytest.raises(ProfkitError, match="speedscope or html"):
            module.write(deep)  # type: ignore[attr-defined]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 60 << 20


def test_collapsed_of_a_moderately_deep_profile_is_exact() -> None:
    text = collapsed.write(deep_profile(300)).decode()
    lines = text.splitlines()
    assert len(lines) == 300
    assert lines[-1] == ";".join(["myapp.rec"] * 300) + " 1"


def test_collapsed_merges_identical_stacks() -> None:
    p = CallProfile("trace")
    a1 = p.frame_id(Frame("m.f", "a.py", 1))
    a2 = p.frame_id(Frame("m.f", "b.py", 9))  # same name, another file
    g = p.frame_id(Frame("m.g", "a.py", 5))
    for tid in (1, 2):  # two threads of the same name
        t = ThreadTree(tid, "Worker")
        t.root.child(a1).add_call(10, 4)
        t.root.child(a1).child(g).add_call(6, 6)
        t.root.child(a2).add_call(3, 3)
        p.threads.append(t)
    p.threads.append(ThreadTree(3, "Other"))
    p.threads[-1].root.child(g).add_call(1, 1)
    lines = collapsed.write(p).decode().splitlines()
    assert sorted(lines) == sorted(
        ["thread_Worker;m.f 14", "thread_Worker;m.f;m.g 12", "thread_Other;m.g 1"]
    )


def _intervals(doc: dict) -> dict[tuple[int, int], list[tuple[Decimal, Decimal]]]:
    out: dict[tuple[int, int], list[tuple[Decimal, Decimal]]] = {}
    for e in doc["traceEvents"]:
        if e["ph"] == "X":
            ts, dur = Decimal(str(e["ts"])), Decimal(str(e["dur"]))
            out.setdefault((e["pid"], e["tid"]), []).append((ts, ts + dur))
    return out


def _no_partial_overlap(spans: list[tuple[Decimal, Decimal]]) -> None:
    spans = sorted(spans, key=lambda s: (s[0], -s[1]))
    open_: list[Decimal] = []
    for start, end in spans:
        while open_ and open_[-1] <= start:
            open_.pop()
        assert not open_ or end <= open_[-1], (start, end, open_[-1])
        open_.append(end)


def _odd_times() -> CallProfile:
    """Children whose times do not add up, odd nanosecond counts (float rounding bait)."""
    p = CallProfile("trace", metadata={"pid": 7})
    t = ThreadTree(1, "MainThread")
    p.threads.append(t)
    f = [p.frame_id(Frame(f"m.f{i}")) for i in range(5)]
    a = t.root.child(f[0])
    a.add_call(1001, 1)
    for i in range(1, 5):  # four children of 333 ns in a 1001 ns parent: they overflow
        a.child(f[i]).add_call(333, 333)
        a.child(f[i]).child(f[0]).add_call(334, 334)  # longer than its parent
    return p


def test_chrome_events_never_overlap_partially() -> None:
    for prof in (sample_profile(), _odd_times(), deep_profile(500)):
        for p in (prof, _without_spans(prof)):
            doc = json.loads(chrome.write(p))
            for spans in _intervals(doc).values():
                _no_partial_overlap(spans)


def _without_spans(p: CallProfile) -> CallProfile:
    return CallProfile(p.mode, p.frames, p.threads, [], p.metadata)


def test_chrome_multi_process_one_pid_each_native_thread_ids() -> None:
    a, b = sample_profile(), sample_profile()
    a.metadata = {"pid": 100, "argv": ["a.py"]}
    b.metadata = {"pid": 200, "argv": ["b.py"]}
    for prof, base in ((a, 1000), (b, 2000)):
        for i, t in enumerate(prof.threads):
            t.thread_id = 140_000_000_000_000  # get_ident: the same after a fork
            t.native_id = base + i
    doc = json.loads(chrome.write(file.combine([a, b])))
    xs = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert {(e["pid"], e["tid"]) for e in xs} == {
        (100, 1000),
        (100, 1001),
        (200, 2000),
        (200, 2001),
    }
    procs = {e["pid"]: e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "process_name"}
    assert procs == {100: "a.py (pid 100)", 200: "b.py (pid 200)"}
    threads = {
        (e["pid"], e["tid"]): e["args"]["name"]
        for e in doc["traceEvents"]
        if e["name"] == "thread_name"
    }
    assert threads[(100, 1001)] == "pid 100: worker"


def test_chrome_without_native_ids_keeps_threads_apart() -> None:
    p = sample_profile()
    for t in p.threads:
        t.thread_id = 140_000_000_000_000 + t.thread_id  # too big for viewers' 32 bits
    doc = json.loads(chrome.write(p))
    tids = {e["tid"] for e in doc["traceEvents"] if e["ph"] == "X"}
    assert tids == {1, 2}


def test_native_id_and_pid_survive_the_file(tmp_path: object) -> None:
    p = sample_profile()
    p.threads[0].native_id, p.threads[0].pid = 31337, 4242
    again = file.loads(json.dumps(file.to_json(p)).encode())
    assert (again.threads[0].native_id, again.threads[0].pid) == (31337, 4242)
    assert (again.threads[1].native_id, again.threads[1].pid) == (None, None)


def test_speedscope_thread_names_use_native_ids() -> None:
    p = sample_profile()
    p.threads[0].native_id = 555
    names = [prof["name"] for prof in json.loads(speedscope.write(p))["profiles"]]
    assert names == ["MainThread (tid 555)", "worker (id 2)"]


def test_big_tree_streams_through_a_sink(monkeypatch: pytest.MonkeyPatch) -> None:
    """write_to writes in pieces; the whole output is never one bytes object."""
    p = CallProfile("trace")
    t = ThreadTree(1, "MainThread")
    p.threads.append(t)
    frames = [p.frame_id(Frame(f"m.f{i}")) for i in range(200)]
    for i in frames:
        n = t.root.child(i)
        n.add_call(10, 5)
        for j in frames:
            n.child(j).add_call(5, 5)

    class Sink:
        def __init__(self) -> None:
            self.writes: list[int] = []

        def write(self, data: bytes) -> int:
            self.writes.append(len(data))
            return len(data)

    for module in (speedscope, chrome, collapsed):
        monkeypatch.setattr(module, "_FLUSH_BYTES", 64 << 10)
        sink = Sink()
        module.write_to(p, sink)  # type: ignore[attr-defined, arg-type]
        assert len(sink.writes) > 3 and max(sink.writes) < 1 << 20, module


def test_node_layout_is_clipped(tmp_path: object) -> None:
    doc = json.loads(speedscope.write(_without_spans(_odd_times())))
    prof = doc["profiles"][0]
    stack: list[tuple[int, int]] = []
    for ev in prof["events"]:
        if ev["type"] == "O":
            stack.append((ev["frame"], ev["at"]))
        else:
            frame, _ = stack.pop()
            assert frame == ev["frame"]
    assert prof["endValue"] == 1001
