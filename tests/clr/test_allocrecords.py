"""The allocation records of the native result file (clr/allocrecords.py): round trips,
damaged files as one clean error, and the memory profile they make."""

from __future__ import annotations

import contextlib
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from profkit.clr.allocprofile import to_memory_profile
from profkit.clr.allocrecords import AllocResult, AllocSite, AllocThread
from profkit.clr.result import ClrResult, Event, parse_result
from profkit.errors import FormatError

names = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\t\n\r"),
    min_size=1,
    max_size=30,
)
u64 = st.integers(0, (1 << 64) - 1)


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
            f"asite\t{i}\t{s.tid}\t{s.type}\t{s.samples}\t{s.bytes}\t{s.at_peak}\t{s.leaked}\t{frames}"
        )
    out += [
        f"athread\t{t.tid}\t{t.allocated}\t{t.peak}\t{t.at_peak}\t{t.leaked}" for t in a.threads
    ]
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
            )
        )
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
    assert meta["peak_bytes"] == 3000 and meta["leaked_bytes"] == 1000
    assert [t.thread_id for t in profile.threads] == [7, 8]  # the main thread first
    names = [profile.frames[i].name for i in meta["memory_views"]["peak"][0][0]]
    assert names == ["App.Main", "App.Work", "[type System.Byte[]]"]
    assert meta["gc"]["count"] == 1 and meta["gc"]["duration_ns_max"] == 20
    assert meta["gc"]["pause_ns_max"] == 40 and meta["gc"]["collections"][0]["pause_ns"] == 40
    assert meta["memory_threads"][0]["peak_bytes"] == 3000


@pytest.mark.parametrize(
    "line",
    [
        "alloc\t1\t2",
        "alloc\t1\t2\t3\t4\t5\t6\t7\t8\t9\t10\t-1",
        "atype\t1\tSkipped",
        "asite\t0\t1\t0\t1\t1\t0\t0\t",  # no type 0
        "asite\t0\t1\t-1\t1\t1\t0\t0\t3",  # no frame 3
        "asite\t0\t1\t-1\t1\t1\t2\t0\t",  # more alive than allocated
        "asite\t0\t1\t-2\t1\t1\t0\t0\t",
        "athread\t1\t2\t3\t4\tx",
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
