"""The allocation sampler: unbiased byte estimates, stacks that name the allocating function,
frees that end a sample's life, and a process the hooks never change (threads, fork, stop)."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator

import pytest

from profkit.heap import Allocation, AllocationSampler, Free, build_profile, native_available
from profkit.heap.sampler import _heaphook

needs_native = pytest.mark.skipif(not native_available(), reason="C hooks not built")


def big_buffers() -> list[bytearray]:
    return [bytearray(200_000) for _ in range(20)]  # 4 MB in 20 blocks


def many_small() -> list[tuple[int, int]]:
    return [(i, i + 1) for i in range(10_000)]


@pytest.fixture
def sampler() -> Iterator[AllocationSampler]:
    made: list[AllocationSampler] = []

    def make(mean: float, native: bool = True) -> AllocationSampler:
        s = AllocationSampler(mean, native=native)
        made.append(s)
        return s

    yield make  # type: ignore[misc]
    for s in made:
        s.stop()


def leaf_names(events: list) -> dict[str, float]:
    return build_profile(events).by_function("alloc")


@needs_native
def test_every_byte_counted_when_the_mean_is_one_byte(sampler) -> None:  # type: ignore[no-untyped-def]
    s = sampler(1)
    s.start()
    kept = big_buffers()
    events = s.drain()
    s.stop()
    assert kept
    allocs = [e for e in events if isinstance(e, Allocation)]
    big = [a for a in allocs if a.size >= 200_000]
    assert len(big) == 20
    assert all(a.stack and a.stack[0][0].co_name in {"big_buffers", "<listcomp>"} for a in big)
    assert all(abs(a.weight - a.size) < 1e-6 * a.size for a in big)


@needs_native
def test_large_allocations_are_always_seen_at_a_coarse_mean(sampler) -> None:  # type: ignore[no-untyped-def]
    s = sampler(16 * 1024)  # p = 1 - exp(-200000/16384) > 0.99999
    s.start()
    kept = big_buffers()
    events = s.drain()
    s.stop()
    assert kept
    sizes = [e.size for e in events if isinstance(e, Allocation) and e.size >= 200_000]
    assert len(sizes) == 20


@needs_native
def test_estimate_attributes_bytes_to_the_allocating_functions(sampler) -> None:  # type: ignore[no-untyped-def]
    # Truth from sampling everything (mean 1 byte), estimate from a coarse mean: the
    # estimate's shares must agree within a few points (the sample is ~2,000 events).
    def shares(mean: float) -> dict[str, float]:
        s = sampler(mean)
        s.start()
        a = big_buffers()
        b = many_small()
        events = s.drain()
        s.stop()
        del a, b
        prof = build_profile(events)
        by_caller: dict[str, float] = {}
        for stack, w in prof.allocated.items():
            hit = next((f for f in stack if f.endswith(("big_buffers", "many_small"))), None)
            if hit is not None:
                key = hit.rsplit(".", 1)[-1]
                by_caller[key] = by_caller.get(key, 0.0) + w
        total = sum(by_caller.values())
        return {k: v / total for k, v in by_caller.items()}

    truth = shares(1)
    estimate = shares(2048)
    assert set(truth) == {"big_buffers", "many_small"}
    for key, share in truth.items():
        assert abs(estimate.get(key, 0.0) - share) < 0.08, (truth, estimate)


@needs_native
def test_freed_blocks_end_their_samples_and_leaks_remain(sampler) -> None:  # type: ignore[no-untyped-def]
    s = sampler(1)
    s.start()
    gone = big_buffers()
    kept = big_buffers()  # both alive here: the peak
    del gone
    events = s.drain()
    s.stop()
    assert kept
    freed = {e.id for e in events if isinstance(e, Free)}
    big = [e for e in events if isinstance(e, Allocation) and e.size >= 200_000]
    assert len(big) == 40
    assert sum(1 for a in big if a.id in freed) == 20
    prof = build_profile(events)
    assert prof.leaked_bytes >= 20 * 200_000
    assert prof.peak_bytes >= 40 * 200_000 * 0.99


@needs_native
def test_threads_are_sampled_with_their_own_ident(sampler) -> None:  # type: ignore[no-untyped-def]
    s = sampler(1)
    s.start()
    box: list[object] = []
    t = threading.Thread(target=lambda: box.append(big_buffers()))
    t.start()
    t.join()
    events = s.drain()
    s.stop()
    threads = {e.thread for e in events if isinstance(e, Allocation) and e.size >= 200_000}
    assert threads == {t.ident}


@needs_native
def test_stop_leaves_a_later_hook_in_place() -> None:
    # A hook installed after ours chains to ours: stopping must not cut it off.
    import tracemalloc

    s = AllocationSampler(1)
    s.start()
    tracemalloc.start()
    try:
        assert s.stop() is False
        assert s.running
    finally:
        tracemalloc.stop()
    assert s.stop() is True
    assert not _heaphook.status()["installed"]


@needs_native
def test_one_sampler_at_a_time(sampler) -> None:  # type: ignore[no-untyped-def]
    s = sampler(1024)
    s.start()
    with pytest.raises(RuntimeError):
        sampler(1024).start()


def test_bad_mean_is_refused() -> None:
    for bad in (0, -1, 1e16, float("nan")):
        with pytest.raises(ValueError):
            AllocationSampler(bad)


@needs_native
@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_child_after_fork_starts_afresh_and_exits_cleanly(sampler) -> None:  # type: ignore[no-untyped-def]
    s = sampler(1)
    s.start()
    big_buffers()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: the parent's log is gone, sampling goes on
        try:
            first = [e for e in s.drain() if isinstance(e, Allocation) and e.size >= 200_000]
            kept = big_buffers()
            later = [e for e in s.drain() if isinstance(e, Allocation) and e.size >= 200_000]
            os.write(w, f"{len(first)} {len(later)} {len(kept)}".encode())
        finally:
            os._exit(0)
    os.close(w)
    got = os.read(r, 100).decode().split()
    os.close(r)
    _, status = os.waitpid(pid, 0)
    assert status == 0
    assert got == ["0", "20", "20"]


def test_fallback_reports_live_blocks_by_function(sampler) -> None:  # type: ignore[no-untyped-def]
    s = sampler(1024, native=False)
    s.start()
    kept = big_buffers()
    events = s.drain()
    s.stop()
    assert kept
    prof = build_profile(events)
    total = sum(w for stack, w in prof.leaked.items() if any("big_buffers" in f for f in stack))
    assert total >= 20 * 200_000


@needs_native
def test_program_output_unchanged_under_sampling(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import subprocess

    prog = tmp_path / "p.py"
    prog.write_text(
        "import sys\n"
        "from profkit.heap import AllocationSampler\n"
        "s = AllocationSampler(4096); s.start()\n"
        "x = [str(i) * 10 for i in range(100000)]\n"
        "print(len(x), sum(map(len, x)))\n"
        "try:\n    raise KeyError('k')\nexcept KeyError as e:\n    print('caught', e)\n"
        "s.drain(); s.stop()\n"
        "sys.exit(3)\n"
    )
    bare = prog.read_text().replace("s = AllocationSampler(4096); s.start()\n", "")
    bare = bare.replace("s.drain(); s.stop()\n", "")
    plain = tmp_path / "q.py"
    plain.write_text(bare)
    a = subprocess.run([sys.executable, str(prog)], capture_output=True, timeout=60)
    b = subprocess.run([sys.executable, str(plain)], capture_output=True, timeout=60)
    assert (a.returncode, a.stdout) == (b.returncode, b.stdout) == (3, b.stdout)
    assert a.stderr == b""


def test_type_names_never_run_a_metaclass_property() -> None:
    from profkit.heap.sampler import TypeNames

    class Meta(type):
        @property
        def __module__(cls) -> str:  # type: ignore[override]
            raise RuntimeError("program code ran")

    class Odd(metaclass=Meta):
        pass

    names = TypeNames()
    assert (
        names.name(1, (id(Odd),))
        == f"{__name__}.test_type_names_never_run_a_metaclass_property.<locals>.Odd"
    )
    assert names.name(1, (id(dict),)) == "dict"


# Blocks freed where the hooks cannot see them: each check runs in a child, so a regression is
# a failed test, not a crashed test worker (the bug they pin was a read of unmapped memory).
_FREED_UNSEEN = """
import gc, sys
from profkit.heap import Allocation, Free
from profkit.heap.sampler import AllocationSampler, _heaphook
BIG = 40 * 1024 * 1024  # above glibc's largest mmap threshold: freeing it unmaps its pages
case = sys.argv[1]
s = AllocationSampler(1)
s.start()
if case == "stop-free-drain":
    block = bytearray(BIG)
    s.stop()
    del block
    events = s.drain()
    print(sum(1 for e in events if isinstance(e, Allocation) and e.size >= BIG))
elif case == "leftovers":
    block = bytearray(BIG)
    s.stop()
    del block
    s2 = AllocationSampler(1)
    s2.start()
    events = s2.drain()
    s2.stop()
    print(sum(1 for e in events if isinstance(e, Allocation) and e.size >= BIG))
elif case == "pause-free":
    block = bytearray(BIG)
    _heaphook.pause()
    del block
    _heaphook.resume()
    events = s.drain()
    s.stop()
    ids = {e.id for e in events if isinstance(e, Allocation) and e.size >= BIG}
    print(len(ids), len(ids & {e.id for e in events if isinstance(e, Free)}))
"""


@needs_native
@pytest.mark.parametrize(
    ("case", "expected"),
    [("stop-free-drain", "1"), ("leftovers", "0"), ("pause-free", "1 1")],
)
def test_blocks_freed_unseen_are_never_read(tmp_path, case: str, expected: str) -> None:  # type: ignore[no-untyped-def]
    import subprocess

    prog = tmp_path / "p.py"
    prog.write_text(_FREED_UNSEEN)
    proc = subprocess.run(
        [sys.executable, str(prog), case], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == expected


@needs_native
def test_paused_allocations_leave_the_programs_countdown_alone(sampler) -> None:  # type: ignore[no-untyped-def]
    # pause() parks the thread's countdown: profkit's own bytes are neither sampled nor
    # counted toward the program's next sample. With a 64 KiB mean, 10 MB allocated while
    # paused would otherwise bring the countdown to zero ~150 times, and the first small
    # allocation after resume would very likely be the sample.
    s = sampler(64 * 1024)
    s.start()
    _heaphook.pause()
    _heaphook.pause()  # nests
    paused = [bytearray(1000) for _ in range(10_000)]
    _heaphook.resume()
    still_paused = bytearray(1000)
    _heaphook.resume()
    assert _heaphook.pending() == 0
    after = [bytearray(100) for _ in range(10)]  # ~1.5 KB: sampled with p ~ 2 %
    events = s.drain()
    s.stop()
    assert paused and still_paused and after
    allocs = [e for e in events if isinstance(e, Allocation)]
    assert len(allocs) <= 2, [(a.size, a.stack[0][0].co_name) for a in allocs]
