"""How a sample's wall weight is decided (issue: N2, absolute times short on a busy
machine): a deterministic reader and clock, no target process, no timing assertions."""

from __future__ import annotations

import os
import random
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from profkit.calltree.model import Frame
from profkit.sampler import session as session_mod
from profkit.sampler.codes import CodeInfo
from profkit.sampler.options import SamplerOptions
from profkit.sampler.reader import ThreadStack
from profkit.sampler.recorder import ProcessRecorder

MS = 1_000_000
INTERVAL = MS  # 1 kHz


def _code(name: str) -> CodeInfo:
    full = f"__main__.{name}"
    return CodeInfo(full, "__main__", "prog.py", 1, b"", Frame(full, "prog.py", 1))


CODES = {n: _code(n) for n in ("main", "a", "b", "c")}


def _stack(tid: int, *names: str, gil: bool = True) -> ThreadStack:
    """A thread's stack, outermost name first (the reader gives innermost first)."""
    frames = tuple((CODES[n], 1) for n in reversed(names))
    return ThreadStack(tid, tid, gil, "/".join(names).encode(), frames)


def _recorder() -> ProcessRecorder:
    return ProcessRecorder(1, None, "", 0, 0)


def _weights(rec: ProcessRecorder) -> dict[tuple[int, str], int]:
    """Weight per (thread, innermost function)."""
    out: dict[tuple[int, str], int] = {}
    for (tid, _), entry in rec.entries.items():
        key = (tid, entry.stack[0][0].name.rsplit(".", 1)[-1])
        out[key] = out.get(key, 0) + entry.weight_ns
    return out


def test_on_time_reads_weigh_the_time_since_the_previous_one():
    rec = _recorder()
    rec.add_wall([_stack(7, "main", "a")], INTERVAL, INTERVAL)
    rec.add_wall([_stack(7, "main", "b")], INTERVAL, INTERVAL)
    assert _weights(rec) == {(7, "a"): MS, (7, "b"): MS}


def test_a_late_read_with_an_unchanged_stack_carries_the_whole_gap():
    """The old rule capped it at 2 intervals and dropped the rest (N2: 1.17 s of 3 s)."""
    rec = _recorder()
    rec.add_wall([_stack(7, "main", "a")], INTERVAL, INTERVAL)
    rec.add_wall([_stack(7, "main", "a")], 40 * MS, INTERVAL)
    assert _weights(rec) == {(7, "a"): 41 * MS}


def test_a_late_read_with_a_changed_stack_splits_the_excess_in_halves():
    rec = _recorder()
    rec.add_wall([_stack(7, "main", "a")], INTERVAL, INTERVAL)
    rec.add_wall([_stack(7, "main", "b")], 41 * MS, INTERVAL)
    # a: its own interval + half of the 40 ms nobody looked at; b: one interval + half
    assert _weights(rec) == {(7, "a"): 21 * MS, (7, "b"): 21 * MS}


def test_threads_seen_at_one_end_of_a_gap_get_that_end_s_half():
    rec = _recorder()
    rec.add_wall([_stack(7, "main", "a"), _stack(8, "c")], INTERVAL, INTERVAL)
    # 8 ended (or released the GIL) during the gap, 9 started
    rec.add_wall([_stack(7, "main", "a"), _stack(9, "b")], 21 * MS, INTERVAL)
    assert _weights(rec) == {(7, "a"): 22 * MS, (8, "c"): 11 * MS, (9, "b"): 11 * MS}


def test_a_torn_read_s_time_is_charged_at_the_next_good_one():
    rec = _recorder()
    rec.add_wall([_stack(7, "a")], INTERVAL, INTERVAL)
    rec.missed(INTERVAL)
    rec.add_wall([_stack(7, "a")], INTERVAL, INTERVAL)
    assert _weights(rec) == {(7, "a"): 3 * MS}


def test_the_first_read_of_a_process_takes_its_gap_whole():
    rec = _recorder()
    rec.add_wall([_stack(7, "b")], 5 * MS, INTERVAL)
    assert _weights(rec) == {(7, "b"): 5 * MS}


@given(
    st.lists(
        st.tuples(
            st.integers(1, 60 * MS),  # gap since the previous read
            st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=1),
        ),
        min_size=1,
        max_size=40,
    )
)
def test_a_thread_present_throughout_gets_every_nanosecond(reads):
    """Whatever the gaps and stack changes, a thread counted at every read totals the
    wall time of all reads: nothing dropped, nothing counted twice."""
    rec = _recorder()
    for gap, (name,) in reads:
        rec.add_wall([_stack(7, "main", name)], gap, INTERVAL)
    assert sum(_weights(rec).values()) == sum(gap for gap, _ in reads)


# -- the loop, with a fake clock and reader ------------------------------------------------


class _FakeLayout:
    version = "3.11.7"


class _FakeNamer:
    main_module = ""


class _FakeReader:
    """Returns scripted stacks; the sleep after each read may oversleep (the sampler
    kept off the CPU) by what the script says for that read."""

    layout = _FakeLayout()
    namer = _FakeNamer()
    native = False

    def __init__(self, clock: list[int], script: Callable[[int], tuple[list[ThreadStack], int]]):
        self.clock = clock
        self.script = script
        self.reads = 0
        self.oversleep = 0

    def thread_name(self, ident: int) -> str | None:
        return None  # threading's names: not scripted (the kernel's names are used)

    def sample(self, want_gil: bool = False) -> list[ThreadStack]:
        stacks, late = self.script(self.reads)
        self.reads += 1
        self.oversleep = late
        return stacks


def _fake_session(monkeypatch, script, **options):
    clock = [10**12]
    reader = _FakeReader(clock, script)
    monkeypatch.setattr(session_mod, "attach_reader", lambda pid, wait_s=0.0: reader)
    monkeypatch.setattr(session_mod, "_runtime_map", lambda pid, r: 0)
    monkeypatch.setattr(session_mod, "_monotonic_ns", lambda: clock[0])
    monkeypatch.setattr(session_mod, "_perf_ns", lambda: clock[0])

    def sleep(seconds: float) -> None:
        clock[0] += int(seconds * 1e9) + reader.oversleep
        reader.oversleep = 0

    monkeypatch.setattr(session_mod.time, "sleep", sleep)
    options.setdefault("follow_children", False)
    sess = session_mod.SamplerSession(os.getpid(), SamplerOptions(rate=1000, **options))
    return sess, clock


@pytest.mark.parametrize("mode", ["wall", "gil", "active"])
def test_a_busy_machine_keeps_wall_totals_true(monkeypatch, mode):
    """Every 4th read the sampler is kept off the CPU for 30 ms (the N2 machine): the
    thread's total is still the session's length; the catch-up reads that follow (at the
    same instant here) add samples, not time."""

    def script(n: int) -> tuple[list[ThreadStack], int]:
        name = "a" if (n // 10) % 2 else "b"
        return [_stack(os.getpid(), "main", name)], 30 * MS if n % 4 == 3 else 0

    if mode == "active":
        monkeypatch.setattr(
            session_mod.ProcessRecorder,
            "clock",
            lambda self, tid: type("C", (), {"running": lambda _: True})(),
        )
    sess, _ = _fake_session(monkeypatch, script, mode=mode, duration=2.0)
    stats = sess.run()
    rec = sess.recorders[os.getpid()]
    total = sum(e.weight_ns for e in rec.entries.values())
    assert stats.elapsed_ns - 31 * MS <= total <= stats.elapsed_ns  # the tail after the last read
    assert stats.unsampled_ns == 0
    assert stats.late > 0.2 * stats.ticks
    assert stats.late_ns > 0.8 * stats.elapsed_ns  # 30 of every ~33 ms were late
    assert stats.ticks >= 0.95 * stats.asked  # caught up
    w = _weights(rec)
    a, b = w[(os.getpid(), "a")], w[(os.getpid(), "b")]
    assert abs(a - b) < 0.15 * total, (a, b)  # the script alternates every 10 reads
    sess.close()


def test_a_stall_is_not_charged_but_counted(monkeypatch):
    """A gap over STALL_NS (the sampler was stopped) is left out of every weight and
    reported as ``unsampled_ns``."""

    def script(n: int) -> tuple[list[ThreadStack], int]:
        return [_stack(os.getpid(), "main", "a")], 3_000 * MS if n == 5 else 0

    sess, _ = _fake_session(monkeypatch, script, duration=5.0)
    stats = sess.run()
    rec = sess.recorders[os.getpid()]
    total = sum(e.weight_ns for e in rec.entries.values())
    assert stats.unsampled_ns == 3_000 * MS + INTERVAL - session_mod.STALL_NS
    assert total + stats.unsampled_ns <= stats.elapsed_ns
    assert total + stats.unsampled_ns >= stats.elapsed_ns - 2 * MS  # the tail after the last read
    sess.close()


def test_the_busy_note_says_how_much_time_was_between_late_reads():
    from profkit.sampler.options import SamplerStats

    assert SamplerStats(late_ns=1 * MS, elapsed_ns=3_000 * MS).busy_note() == ""
    note = SamplerStats(late_ns=1_820 * MS, elapsed_ns=3_000 * MS).busy_note()
    assert "1.82 s of 3.00 s (61 %)" in note and "charged" in note
    stalled = SamplerStats(unsampled_ns=2_000 * MS, elapsed_ns=5_000 * MS).busy_note()
    assert stalled.startswith("2.00 s not sampled")


def test_top_shows_weights_not_sample_counts(monkeypatch):
    """One read 40 ms late in 50 ms: top's times are the ~50 ms the samples weigh, not
    the ~10 reads times 1 ms."""
    from profkit.sampler.top import TopState, render_top

    def script(n: int) -> tuple[list[ThreadStack], int]:
        return [_stack(os.getpid(), "main", "a")], 40 * MS if n == 0 else 0

    sess, _ = _fake_session(monkeypatch, script, duration=0.05)
    sess.run()
    text = render_top(sess, TopState())
    row = next(line for line in text.splitlines() if "__main__.a" in line)
    assert "0.05s" in row, text
    sess.close()


def test_a_baseline_read_splits_a_new_process_s_first_gap():
    rec = _recorder()
    rec.baseline([_stack(7, "main", "a")])
    rec.add_wall([_stack(7, "main", "b")], 41 * MS, INTERVAL)
    assert _weights(rec) == {(7, "a"): 20 * MS, (7, "b"): 21 * MS}
    assert rec.samples == 1  # the baseline is no sample
    assert sum(e.samples for e in rec.entries.values()) == 1


def test_a_baseline_stack_never_charged_is_not_in_the_tree():
    from profkit.calltree.model import CallProfile

    rec = _recorder()
    rec.baseline([_stack(7, "main", "a")])
    rec.add_wall([_stack(7, "main", "b")], INTERVAL, INTERVAL)
    profile = CallProfile(mode="sample")
    rec._build_trees(profile, None, False)
    assert {f.name for f in profile.frames} == {"__main__.main", "__main__.b"}


def test_a_child_found_is_read_once_at_once(monkeypatch):
    """Findings N7: a Pool worker found during a loaded stretch got its whole first gap
    (116 ms) charged to the stack of its first read (``sq``, 67 ms of its life). Now the
    read at discovery is the baseline its first gap is split with."""

    def script(n: int) -> tuple[list[ThreadStack], int]:
        return [_stack(os.getpid(), "main", "a")], 0

    sess, _ = _fake_session(monkeypatch, script, duration=0.01)
    child_pid = os.getppid()
    child = _FakeReader([0], lambda n: ([_stack(child_pid, "c" if n == 0 else "b")], 0))
    monkeypatch.setattr(session_mod.StackReader, "attach", staticmethod(lambda pid: child))
    sess._try_follow(child_pid)
    assert child.reads == 1
    sess.tick(41 * MS, INTERVAL)
    assert _weights(sess.recorders[child_pid]) == {
        (child_pid, "c"): 20 * MS,
        (child_pid, "b"): 21 * MS,
    }
    sess.close()


class _FakeCpuClock:
    """A thread always on a CPU: its CPU time is the fake wall clock."""

    def __init__(self, clock: list[int]) -> None:
        self.clock = clock
        self.last = clock[0]

    def read(self) -> int:
        return self.clock[0]

    def delta_to(self, now: int | None) -> int:
        used, self.last = (now or self.last) - self.last, now or self.last
        return used

    def delta(self) -> int:
        return self.delta_to(self.read())

    def running(self) -> bool:
        return True

    def close(self) -> None:
        pass


@pytest.mark.parametrize("mode", ["wall", "gil", "active", "cpu"])
def test_a_read_slow_for_one_stack_does_not_weigh_that_stack_more(monkeypatch, mode):
    """Reading ``a`` takes the sampler 4 ms, any other read 50 us (a new stack is named
    with a read per frame, each of which may wait for the target's mmap lock: sympy's
    monomial_mul, called at a data-stack chunk boundary, session 14); ``a`` is an eighth
    of the reads. Its share of the weight stays near an eighth: the time after the read
    is the sampler's own, as long as it is because of what the read saw, and went half to
    ``a`` before (wall: 12 % of the samples, 28 % of the weight)."""
    box: list[list[int]] = []
    draw = random.Random(14).random  # where a read lands does not follow the schedule

    def script(n: int) -> tuple[list[ThreadStack], int]:
        slow = draw() < 1 / 8
        box[0][0] += 4 * MS if slow else MS // 20  # what the read itself takes
        return [_stack(os.getpid(), "main", "a" if slow else "b")], 0

    clocks: dict[int, _FakeCpuClock] = {}

    def fake_clock(self, tid):
        return self.clocks.setdefault(tid, clocks.setdefault(tid, _FakeCpuClock(box[0])))

    monkeypatch.setattr(session_mod.ProcessRecorder, "clock", fake_clock)
    sess, clock = _fake_session(monkeypatch, script, mode=mode, duration=2.0)
    box.append(clock)
    stats = sess.run()
    sess.close()
    rec = sess.recorders[os.getpid()]
    w = _weights(rec)
    a, b = w[(os.getpid(), "a")], w[(os.getpid(), "b")]
    samples = {e.stack[0][0].name: e.samples for e in rec.entries.values()}
    share = samples["__main__.a"] / (samples["__main__.a"] + samples["__main__.b"])
    assert 0.1 < share < 0.15
    assert abs(a / (a + b) - share) < 0.03, (a / (a + b), share)
    total = a + b
    assert stats.elapsed_ns - 6 * MS <= total <= stats.elapsed_ns  # nothing lost
