"""The native profiler's result file: round trips, and damaged files as one clean error."""

from __future__ import annotations

import contextlib
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from profkit.clr.convert import perf_map_entries, r2r_rvas, to_profile
from profkit.clr.result import (
    ClrResult,
    CodeRange,
    Event,
    Module,
    Node,
    SpanRecord,
    parse_result,
)
from profkit.errors import FormatError

names = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\t\n\r"),
    min_size=1,
    max_size=30,
)
u64 = st.integers(0, (1 << 64) - 1)


def render(r: ClrResult) -> bytes:
    """What libprofkit_clr.so writes (csrc/output.c, write_output), for the same content."""
    out = [
        "profkit-clr\t1",
        f"pid\t{r.pid}",
        f"info\t{r.info_version}",
        f"duration\t{r.duration_ns}",
    ]
    out += [f"basetime\t{r.basetime_ns}", f"lost\t{r.lost}", f"resyncs\t{r.resyncs}"]
    out += [f"records_dropped\t{r.records_dropped}", f"lines\t{r.lines}"]
    out += [f"udp\t{r.udp_datagrams}\t{r.udp_dropped}", f"spans_dropped\t{r.spans_dropped}"]
    out += [f"prefix\t{p}" for p in r.prefixes]
    out += [f"method\t{i}\t{n}" for i, n in r.methods.items()]
    for tid, name in r.threads.items():
        out.append(f"thread\t{tid}\t{name}")
        for n in r.nodes.get(tid, []):
            out.append(
                f"node\t{tid}\t{n.index}\t{n.parent}\t{n.method}\t{n.calls}\t{n.incl}\t{n.min}\t{n.max}"
            )
    out += [f"module\t{m.id:x}\t{m.base:x}\t{m.flags}\t{m.path}" for m in r.modules]
    out += [f"code\t{c.start:x}\t{c.size:x}\t{c.kind}\t{c.module:x}\t{c.name}" for c in r.code]
    out += [f"span\t{p.tid}\t{p.method}\t{p.start_ns}\t{p.end_ns}\t{p.depth}" for p in r.spans]
    out += [f"event\t{e.t_ns}\t{e.tid}\t{e.kind}\t{e.text}" for e in r.events]
    out.append("end")
    return ("\n".join(out) + "\n").encode()


@st.composite
def results(draw: st.DrawFn) -> ClrResult:
    r = ClrResult(pid=draw(st.integers(1, 1 << 22)), lost=draw(u64), duration_ns=draw(u64))
    method_names = draw(st.lists(names, max_size=6))
    r.methods = {i + 1: n for i, n in enumerate(method_names)}
    for tid in draw(st.lists(st.integers(1, 1 << 22), max_size=3, unique=True)):
        r.threads[tid] = draw(st.one_of(st.just(""), names))
        nodes = []
        for index in range(1, draw(st.integers(0, 8)) + 1):
            parent = draw(st.integers(0, index - 1))
            method = draw(st.integers(0, len(method_names)))
            lo, hi = sorted(draw(st.lists(st.integers(0, 10**9), min_size=2, max_size=2)))
            calls = draw(st.integers(0, 5))
            nodes.append(Node(index, parent, method, calls, hi * calls, lo, hi))
        if nodes:
            r.nodes[tid] = nodes
    r.modules = [Module(draw(u64), draw(u64), draw(st.integers(0, 255)), draw(names))]
    r.code = [
        CodeRange(
            draw(u64), draw(u64), draw(st.sampled_from(["jit", "r2r"])), draw(u64), draw(names)
        )
        for _ in range(draw(st.integers(0, 4)))
    ]
    r.events = [Event(draw(u64), draw(u64), "exception", draw(names))]
    for _ in range(draw(st.integers(0, 4)) if r.methods and r.threads else 0):
        start = draw(st.integers(0, 10**12))
        r.spans.append(
            SpanRecord(
                draw(st.sampled_from(sorted(r.threads))),
                draw(st.sampled_from(sorted(r.methods))),
                start,
                start + draw(st.integers(0, 10**9)),
                draw(st.integers(0, 50)),
            )
        )
    return r


@given(results())
@settings(max_examples=60, deadline=None)
def test_round_trip(r: ClrResult) -> None:
    assert parse_result(render(r)) == r
    profile = to_profile(r)  # never fails on a well-formed result
    for thread in profile.threads:
        assert thread.root.children
    perf_map_entries(r)
    r2r_rvas(r)


SAMPLE = ClrResult(
    pid=42,
    methods={1: "A.B.Main", 2: "A.B.F", 3: "A.B.F"},
    threads={42: ""},
    nodes={
        42: [
            Node(1, 0, 1, 1, 100, 100, 100),
            Node(2, 1, 2, 2, 30, 10, 20),
            Node(3, 1, 3, 1, 20, 20, 20),
        ]
    },
    modules=[Module(7, 0x1000, 1, "/x/A.dll")],
    code=[
        CodeRange(0x1200, 0x10, "r2r", 7, "A.B.F"),
        CodeRange(0x9000, 0x20, "jit", 7, "A.B.Main"),
    ],
)


def test_overloads_with_one_name_merge_into_one_node() -> None:
    profile = to_profile(parse_result(render(SAMPLE)))
    (thread,) = profile.threads
    assert thread.name == "Main Thread"
    (main,) = thread.root.children.values()
    (f,) = main.children.values()
    assert (f.calls, f.inclusive_ns, f.min_ns, f.max_ns) == (3, 50, 10, 20)
    assert main.exclusive_ns == 50
    assert r2r_rvas(SAMPLE) == [("/x/A.dll", 0x200, 0x10, "A.B.F")]
    assert perf_map_entries(SAMPLE) == [(0x1200, 0x10, "A.B.F [r2r]"), (0x9000, 0x20, "A.B.Main")]


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        (b"", "bad_magic"),
        (b"hello\n", "bad_magic"),
        (b"profkit-clr\t2\nend\n", "unsupported_version"),
        (b"profkit-clr\t1\npid\t1\n", "truncated"),
        (b"profkit-clr\t1\nbogus\t1\nend\n", "malformed"),
        (b"profkit-clr\t1\npid\t-1\nend\n", "malformed"),
        (b"profkit-clr\t1\npid\t99999999999999999999999\nend\n", "malformed"),
        (b"profkit-clr\t1\nthread\t1\t\nnode\t1\t2\t0\t0\t1\t1\t1\t1\nend\n", "malformed"),
        (b"profkit-clr\t1\nthread\t1\t\nnode\t1\t1\t0\t9\t1\t1\t1\t1\nend\n", "malformed"),
        (b"profkit-clr\t1\nnode\t1\t1\t0\t0\t1\t1\t1\t1\nend\n", "malformed"),
        (b"profkit-clr\t1\ncode\t1\t1\tzzz\t1\tx\nend\n", "malformed"),
    ],
)
def test_damaged_files_are_one_format_error(data: bytes, kind: str) -> None:
    with pytest.raises(FormatError) as info:
        parse_result(data, "r.txt")
    assert info.value.kind == kind
    assert str(info.value).startswith("r.txt")


def test_truncated_and_mutated_files_never_crash() -> None:
    data = render(SAMPLE)
    rng = random.Random(13)
    for cut in range(len(data)):
        with contextlib.suppress(FormatError):
            parse_result(data[:cut])
    for _ in range(500):
        mutated = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            mutated[rng.randrange(len(mutated))] = rng.randrange(256)
        with contextlib.suppress(FormatError):
            to_profile(parse_result(bytes(mutated)))


def test_size_checked_before_parsing(monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> None:
    from profkit.clr import result as result_mod

    monkeypatch.setattr(result_mod, "MAX_BYTES", 64)
    with pytest.raises(FormatError) as info:
        result_mod.parse_result(b"profkit-clr\t1\n" + b" " * 64)
    assert info.value.kind == "too_large"
