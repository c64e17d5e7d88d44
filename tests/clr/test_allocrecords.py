"""The allocation records of the native result file (clr/allocrecords.py): round trips,
damaged files as one clean error, and the memory profile they make."""

from __future__ import annotations

import contextlib
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from profkit.calltree.model import CallNode
from profkit.clr.allocprofile import to_memory_profile
from profkit.clr.allocrecords import AllocResult, AllocSite, AllocStratum, AllocThread
from profkit.clr.allocstrata import ESTIMATOR, apportion
from profkit.clr.result import ClrResult, Event, parse_result
from profkit.errors import FormatError

names = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\t\n\r"),
    min_size=1,
    max_size=30,
)
u64 = st.integers(0, (1 << 64) - 1)
classes = st.sampled_from([0, 10, 63, 255])  # size classes: 0-63, 255 the "other" stratum


def render(r: ClrResult) -> bytes:
    """What csrc/alloc.c and alloc_sites.c write after the other records."""
    a = r.alloc
    assert a is not None
    out = ["profkit-clr\t1", f"pid\t{r.pid}"]
    out += [f"event\t{e.t_ns}\t{e.tid}\t{e.kind}\t{e.text}" for e in r.events]
    values = [a.mean, a.objects, a.bytes, a.samples, a.exact_samples, a.untracked, a.gcs]
    values += [a.peak_bytes, a.stack_failures, a.moved, a.died]
    out.append("alloc\t" + "\t".join(str(v) for v in values))
    out += [f"atype\t{i}\t{n}" for i, n in enumerate(a.types)]
    out += [f"aframe\t{i}\t{n}" for i, n in enumerate(a.frames)]
    for i, s in enumerate(a.sites):
        frames = ",".join(str(f) for f in s.frames)
        out.append(
            f"asite\t{i}\t{s.tid}\t{s.type}\t{s.sclass}\t{s.samples}\t{s.bytes}\t{s.at_peak}\t"
            f"{s.leaked}\t{frames}"
        )
    out += [
        f"athread\t{t.tid}\t{t.allocated}\t{t.peak}\t{t.at_peak}\t{t.leaked}" for t in a.threads
    ]
    out += [f"astratum\t{t.tid}\t{t.type}\t{t.sclass}\t{t.objects}\t{t.bytes}" for t in a.strata]
    out.append("end")
    return ("\n".join(out) + "\n").encode()


@st.composite
def results(draw: st.DrawFn) -> ClrResult:
    a = AllocResult(*(draw(u64) for _ in range(9)))
    a.moved, a.died = draw(u64), draw(u64)
    a.types = draw(st.lists(names, max_size=4))
    a.frames = draw(st.lists(names, max_size=6))
    for _ in range(draw(st.integers(0, 6))):
        weight = draw(st.integers(0, 1 << 40))
        a.sites.append(
            AllocSite(
                draw(st.integers(1, 1 << 22)),
                draw(st.integers(-1, len(a.types) - 1)),
                draw(st.integers(1, 1000)),
                weight,
                draw(st.integers(0, weight)),
                draw(st.integers(0, weight)),
                tuple(draw(st.lists(st.integers(-1, len(a.frames) - 1), max_size=5))),
                draw(classes),
            )
        )
    for _ in range(draw(st.integers(0, 4))):
        tid, kind = draw(st.integers(1, 1 << 22)), draw(st.integers(-1, len(a.types) - 1))
        a.strata.append(AllocStratum(tid, kind, draw(classes), draw(u64), draw(u64)))
    a.threads = [
        AllocThread(*(draw(u64) for _ in range(5))) for _ in range(draw(st.integers(0, 2)))
    ]
    return ClrResult(pid=draw(st.integers(1, 1 << 22)), alloc=a)


@given(results())
@settings(max_examples=60, deadline=None)
def test_round_trip(r: ClrResult) -> None:
    assert parse_result(render(r)) == r


SAMPLE = ClrResult(
    pid=7,
    events=[
        Event(5, 7, "suspend", "1"),
        Event(10, 7, "gc-start", "0 other"),
        Event(30, 7, "gc-end", ""),
        Event(45, 7, "resume", ""),
    ],
    alloc=AllocResult(
        mean=1024, objects=10, bytes=5000, samples=3, gcs=1, peak_bytes=3000,
        types=["System.Byte[]"], frames=["App.Main", "App.Work"],
        sites=[AllocSite(7, 0, 2, 3000, 3000, 1000, (0, 1)), AllocSite(8, -1, 1, 500, 0, 0, ())],
        threads=[AllocThread(7, 3000, 3000, 3000, 1000), AllocThread(8, 500, 500, 0, 0)],
    ),
)  # fmt: skip


def test_the_memory_profile_of_the_records() -> None:
    profile = to_memory_profile(parse_result(render(SAMPLE)), prefixes=("App",))
    meta = profile.metadata
    assert profile.mode == "memory"
    assert meta["allocated_bytes"] == 3500 and meta["runtime_allocated_bytes"] == 5000
    assert meta["alloc_strata"] is None  # no astratum records: the weights as sampled
    assert meta["peak_bytes"] == 3000 and meta["leaked_bytes"] == 1000
    assert [t.thread_id for t in profile.threads] == [7, 8]  # the main thread first
    names = [profile.frames[i].name for i in meta["memory_views"]["peak"][0][0]]
    assert names == ["App.Main", "App.Work", "[type System.Byte[]]"]
    assert meta["gc"]["count"] == 1 and meta["gc"]["duration_ns_max"] == 20
    assert meta["gc"]["pause_ns_max"] == 40 and meta["gc"]["collections"][0]["pause_ns"] == 40
    assert meta["memory_threads"][0]["peak_bytes"] == 3000


STRATIFIED = ClrResult(
    pid=7,
    alloc=AllocResult(
        mean=1024, objects=22, bytes=12424, samples=4,
        types=["System.Byte[]", "App.Node"], frames=["App.Main", "App.Work"],
        sites=[
            AllocSite(7, 0, 2, 3000, 0, 0, (0, 1), 11),
            AllocSite(7, 0, 1, 1000, 0, 0, (0,), 11),
            AllocSite(8, -1, 1, 500, 0, 0, (), 5),
        ],
        strata=[
            AllocStratum(7, 0, 11, 5, 10000),  # one stratum over two threads: 12000 bytes
            AllocStratum(8, 0, 11, 1, 2000),
            AllocStratum(8, -1, 5, 4, 200),
            AllocStratum(7, 1, 4, 10, 160),  # no sample: unattributed
            AllocStratum(8, -1, 255, 2, 64),  # beyond the native cap: "other", no sample
        ],
    ),
)  # fmt: skip


def test_each_stratum_adds_up_to_its_exact_total() -> None:
    profile = to_memory_profile(parse_result(render(STRATIFIED)), prefixes=("App",))
    meta = profile.metadata
    assert meta["alloc_estimator"] == ESTIMATOR
    assert meta["allocated_bytes"] == meta["runtime_allocated_bytes"] == 12424
    assert meta["unattributed_bytes"] == 224 and meta["unattributed_objects"] == 12
    strata = meta["alloc_strata"]
    assert strata["method"] == ESTIMATOR and strata["exact_bytes"] == 12424
    assert strata["strata"] == 4 and strata["unsampled"] == 2 and strata["other_bytes"] == 64
    stacks: dict[tuple[object, ...], int] = {}
    for thread in profile.threads:
        pending: list[tuple[tuple[str, ...], CallNode]] = [((), thread.root)]
        while pending:
            path, node = pending.pop()
            for child in node.children.values():
                name = profile.frames[child.frame].name
                if not child.children:
                    stacks[(thread.thread_id, *path, name)] = child.inclusive_ns
                pending.append(((*path, name), child))
    assert stacks == {
        (7, "App.Main", "App.Work", "[type System.Byte[]]"): 9000,  # 12000 split 3:1
        (7, "App.Main", "[type System.Byte[]]"): 3000,
        (7, "[unattributed]", "[type App.Node]"): 160,
        (8, "[type ?]"): 200,
        (8, "[unattributed]", "[type [other strata]]"): 64,
    }
    types = {t["type"]: (t["bytes"], t["objects"]) for t in meta["memory_types"]}
    assert types == {
        "System.Byte[]": (12000, 6), "App.Node": (160, 10), "?": (200, 4), "[other strata]": (64, 2)
    }  # fmt: skip
    rows = {r["thread"]: r for r in meta["memory_threads"]}
    assert rows[7]["allocated_bytes"] == 12160 and rows[7]["runtime_allocated_bytes"] == 10160
    assert rows[8]["allocated_bytes"] == 264 and rows[8]["runtime_allocated_bytes"] == 2264


@given(st.integers(0, 1 << 50), st.lists(st.integers(0, 1 << 40), min_size=1, max_size=8))
@settings(max_examples=200, deadline=None)
def test_apportion_is_whole_exact_and_proportional(total: int, weights: list[int]) -> None:
    if sum(weights) == 0:
        weights = [*weights[:-1], 1]
    shares = apportion(total, weights)
    assert sum(shares) == total
    for share, w in zip(shares, weights, strict=True):
        assert abs(share - total * w / sum(weights)) < 1 + 1e-9 * total


@pytest.mark.parametrize(
    "line",
    [
        "alloc\t1\t2",
        "alloc\t1\t2\t3\t4\t5\t6\t7\t8\t9\t10\t-1",
        "atype\t1\tSkipped",
        "asite\t0\t1\t0\t5\t1\t1\t0\t0\t",  # no type 0
        "asite\t0\t1\t-1\t5\t1\t1\t0\t0\t3",  # no frame 3
        "asite\t0\t1\t-1\t5\t1\t1\t2\t0\t",  # more alive than allocated
        "asite\t0\t1\t-2\t5\t1\t1\t0\t0\t",
        "asite\t0\t1\t-1\t64\t1\t1\t0\t0\t",  # no size class 64
        "asite\t0\t1\t-1\t1\t1\t0\t0\t",  # a field short (the size class)
        "athread\t1\t2\t3\t4\tx",
        "astratum\t1\t0\t5\t1\t8",  # no type 0
        "astratum\t1\t-1\t254\t1\t8",
        "astratum\t1\t-1\t5\t1\t-8",
    ],
)
def test_damaged_records_are_one_format_error(line: str) -> None:
    with pytest.raises(FormatError) as info:
        parse_result(f"profkit-clr\t1\n{line}\nend\n".encode(), "r.txt")
    assert info.value.kind == "malformed"
    assert str(info.value).startswith("r.txt")


def test_truncated_and_mutated_records_never_crash() -> None:
    data = render(SAMPLE)
    rng = random.Random(24)
    for cut in range(len(data)):
        with contextlib.suppress(FormatError):
            parse_result(data[:cut])
    for _ in range(500):
        mutated = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            mutated[rng.randrange(len(mutated))] = rng.randrange(256)
        with contextlib.suppress(FormatError):
            to_memory_profile(parse_result(bytes(mutated)))
