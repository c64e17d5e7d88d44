"""The ELT profiler on a fake collector: tree, durations, filter, base time, generators, threads."""

from __future__ import annotations

import threading
from typing import Any

from profkit.api import EventMask, ThreadInfo
from profkit.api.errors import UnknownIdError
from profkit.api.ids import ThreadId
from profkit.calltree.model import CallNode, CallProfile
from profkit.profilers.elt import EltProfiler, SamplingProfiler
from profkit.settings import Settings
from tests.profilers.elt.fake import FakeClock, FakeDriver


def make(**settings: Any) -> tuple[EltProfiler, FakeDriver, list[str]]:
    clock = FakeClock()
    lines: list[str] = []
    prof = EltProfiler(Settings(**settings), clock=clock, standalone=False, on_line=lines.append)
    return prof, FakeDriver(prof, clock), lines


def flat(profile: CallProfile, thread: int = 0) -> dict[str, tuple[int, int, int, int, int]]:
    """``"a/b/c" -> (calls, inclusive, exclusive, min, max)`` for every node of a thread."""
    out: dict[str, tuple[int, int, int, int, int]] = {}

    def visit(node: CallNode, path: str) -> None:
        for child in node.children.values():
            p = (
                f"{path}/{profile.frames[child.frame].name}"
                if path
                else profile.frames[child.frame].name
            )
            out[p] = (
                child.calls,
                child.inclusive_ns,
                child.exclusive_ns,
                child.min_ns,
                child.max_ns,
            )
            visit(child, p)

    visit(profile.threads[thread].root, "")
    return out


def finish(prof: EltProfiler) -> CallProfile:
    prof.shutdown()
    assert prof.profile is not None
    return prof.profile


def test_tree_durations_and_exclusive_time() -> None:
    prof, d, _ = make()
    # C calls come from the collector's transitions, or from the C recorder's own tool
    assert d.info.mask & ~EventMask.CODE_TRANSITIONS == EventMask.ENTER_LEAVE
    with d.call("app.main", 10, 5):
        d.leaf("app.work", 100)
        d.leaf("app.work", 300)
        with d.call("app.helper", 1):
            d.leaf("app.work", 50)
    tree = flat(finish(prof))
    assert tree == {
        "app.main": (1, 466, 15, 466, 466),
        "app.main/app.work": (2, 400, 400, 100, 300),
        "app.main/app.helper": (1, 51, 1, 51, 51),
        "app.main/app.helper/app.work": (1, 50, 50, 50, 50),
    }
    profile = prof.profile
    assert profile is not None and profile.mode == "trace"
    assert profile.threads[0].root.inclusive_ns == 466
    frame = profile.frames[next(iter(profile.threads[0].root.children))]
    assert (frame.file, frame.line) == ("/src/app.py", 10)
    assert profile.metadata["settings"]["mode"] == "trace"


def test_recursion_makes_nested_nodes() -> None:
    prof, d, _ = make()

    def rec(n: int) -> None:
        with d.call("app.fact", 1):
            if n:
                rec(n - 1)

    rec(3)
    tree = flat(finish(prof))
    assert tree["app.fact"][1] == 4
    assert tree["app.fact/app.fact/app.fact/app.fact"] == (1, 1, 1, 1, 1)


def test_event_lines_in_the_article_format() -> None:
    _prof, d, lines = make()
    with d.call("app.main", 1000):
        d.leaf("app.work", 12250)
    assert lines == [
        "Enter: app.main",
        "    Enter: app.work",
        "    Leave: app.work, Duration: 12.250 us",
        "Leave: app.main, Duration: 13.250 us",
    ]


def test_event_lines_in_nanoseconds() -> None:
    _prof, d, lines = make(unit="ns")
    d.leaf("app.work", 1234)
    assert lines == ["Enter: app.work", "Leave: app.work, Duration: 1234 ns"]


def test_prefix_filter_charges_hidden_callees_to_the_caller() -> None:
    prof, d, lines = make(prefixes=("app",))
    with d.call("app.main", 10):
        with d.call("json.decoder.decode", 100):
            d.leaf("app.callback", 7)  # shown again below a hidden frame
        d.leaf("application.other", 50)  # not under "app": module-path boundary
    tree = flat(finish(prof))
    assert tree == {
        "app.main": (1, 167, 160, 167, 167),
        "app.main/app.callback": (1, 7, 7, 7, 7),
    }
    assert all("json" not in line and "application" not in line for line in lines)


def test_internal_modules_are_never_shown() -> None:
    prof, d, _ = make()
    with d.call("runpy._run_code", 1):
        d.leaf("profkit.cli.run._execute", 1)
        d.leaf("profkit.demo.work", 3)
        d.leaf("__main__.main", 2)
    assert set(flat(finish(prof))) == {"profkit.demo.work", "__main__.main"}


def test_basetime_hides_short_calls_without_orphans() -> None:
    prof, d, lines = make(basetime_ns=100)
    with d.call("app.main", 10):
        with d.call("app.fast", 5):  # short, with a short child: all hidden
            d.leaf("app.tiny", 1)
        with d.call("app.slow", 5):  # long because of its child: shown
            d.leaf("app.long", 200)
        d.leaf("app.fast", 20)
    assert lines == [
        "Enter: app.main",
        "    Enter: app.slow",
        "        Enter: app.long",
        "        Leave: app.long, Duration: 0.200 us",
        "    Leave: app.slow, Duration: 0.205 us",
        "Leave: app.main, Duration: 0.241 us",
    ]
    tree = flat(finish(prof))
    # Hidden calls (fast, tiny) are charged to main's exclusive time.
    assert tree == {
        "app.main": (1, 241, 36, 241, 241),
        "app.main/app.slow": (1, 205, 5, 205, 205),
        "app.main/app.slow/app.long": (1, 200, 200, 200, 200),
    }


def test_basetime_writes_enter_early_once_a_call_has_run_long_enough() -> None:
    _prof, d, lines = make(basetime_ns=100)
    d.enter("app.main")
    d.clock.advance(150)
    d.enter("app.child")  # main has now run 150 ns >= 100: its Enter is certain
    assert lines == ["Enter: app.main"]
    d.clock.advance(1)
    d.leave("app.child")
    d.leave("app.main")
    assert lines == ["Enter: app.main", "Leave: app.main, Duration: 0.151 us"]
    # Every Enter has exactly one matching Leave at the same depth.
    assert_balanced(lines)


def test_no_quadratic_output_every_line_written_once() -> None:
    _prof, d, lines = make(basetime_ns=10)
    with d.call("app.main", 10):
        for _ in range(200):
            d.leaf("app.work", 20)
            d.leaf("app.fast", 1)
    assert len(lines) == 2 + 2 * 200
    assert_balanced(lines)


def assert_balanced(lines: list[str]) -> None:
    stack: list[tuple[int, str]] = []
    for line in lines:
        depth = (len(line) - len(line.lstrip(" "))) // 4
        kind, _, rest = line.strip().partition(": ")
        name = rest.split(",")[0]
        if kind in ("Enter", "Resume"):
            assert depth == len(stack), line
            stack.append((depth, name))
        else:
            assert stack and stack.pop() == (depth, name), line
    assert not stack


def test_generator_activations_and_suspended_time_not_charged() -> None:
    prof, d, lines = make()
    with d.call("app.consumer", 10):
        gen = d.info.fid("app.numbers", generator=True)
        d.hook("function_enter")(gen)  # first start
        d.clock.advance(3)
        d.yield_("app.numbers")
        d.clock.advance(1000)  # suspended: charged to the consumer, not the generator
        d.resume("app.numbers")
        d.clock.advance(4)
        d.yield_("app.numbers")
        d.resume("app.numbers")
        d.clock.advance(5)
        d.leave("app.numbers")  # exhausted
    tree = flat(finish(prof))
    assert tree["app.consumer/app.numbers"] == (3, 12, 12, 3, 5)
    assert tree["app.consumer"][2] == 10 + 1000
    assert lines[1:4] == [
        "    Enter: app.numbers",
        "    Yield: app.numbers, Duration: 0.003 us",
        "    Resume: app.numbers",
    ]
    assert lines[-2] == "    Leave: app.numbers, Duration: 0.005 us"
    assert_balanced(lines)


def test_generator_resumed_elsewhere_goes_under_the_resumer() -> None:
    prof, d, _ = make()
    with d.call("app.make", 1):
        d.enter("app.gen")
        d.clock.advance(2)
        d.yield_("app.gen")
    with d.call("app.use", 1):
        d.resume("app.gen")
        d.clock.advance(7)
        d.leave("app.gen")
    tree = flat(finish(prof))
    assert tree["app.make/app.gen"][:2] == (1, 2)
    assert tree["app.use/app.gen"][:2] == (1, 7)


def test_unmatched_leave_is_ignored_and_missed_leaves_are_closed() -> None:
    prof, d, _ = make()
    d.leave("app.started_before_attach")  # nothing on the stack: ignored
    d.enter("app.outer")
    d.enter("app.lost")  # its leave never comes
    d.clock.advance(5)
    d.leave("app.outer")  # closes app.lost at the same instant
    tree = flat(finish(prof))
    assert tree == {"app.outer": (1, 5, 0, 5, 5), "app.outer/app.lost": (1, 5, 5, 5, 5)}


def test_unmatched_leave_with_event_lines_and_an_empty_stack_is_ignored() -> None:
    """Regression: the write-at-once line path popped the root itself (IndexError)."""
    prof, d, lines = make()
    d.leaf("app.f", 1)
    d.leave("app.f")  # nothing is open any more
    d.leave("app.g")
    assert lines == ["Enter: app.f", "Leave: app.f, Duration: 0.001 us"]
    assert flat(finish(prof)) == {"app.f": (1, 1, 1, 1, 1)}


def test_open_calls_are_closed_at_shutdown() -> None:
    prof, d, _ = make()
    d.enter("app.main")
    d.clock.advance(40)
    profile = finish(prof)
    assert flat(profile) == {"app.main": (1, 40, 40, 40, 40)}
    assert profile.metadata["open_calls_closed_at_end"] == 1


def test_threads_have_their_own_stacks_and_trees() -> None:
    prof, d, _ = make()
    d.enter("app.main")

    def worker() -> None:
        with d.call("app.worker", 5):
            d.leaf("app.task", 5)

    t = threading.Thread(target=worker, name="W")
    t.start()
    t.join()
    d.leave("app.main")
    profile = finish(prof)
    assert len(profile.threads) == 2
    by_name = {t.name: i for i, t in enumerate(profile.threads)}
    assert set(flat(profile, by_name["W"])) == {"app.worker", "app.worker/app.task"}
    main = next(i for n, i in by_name.items() if n != "W")
    assert set(flat(profile, main)) == {"app.main"}


def test_sampling_mode_builds_a_weighted_tree() -> None:
    clock = FakeClock()
    prof = SamplingProfiler(Settings(prefixes=("app",)), clock=clock, standalone=False)
    d = FakeDriver(prof, clock)
    assert d.info.mask == EventMask.SAMPLING
    d.sample(1, ["app.main", "app.work"], 1000)
    d.sample(1, ["app.main", "app.work"], 1000)
    d.sample(1, ["app.main", "json.loads", "app.hook"], 500)
    d.sample(1, ["app.main", "re.compile"], 250)  # hidden leaf: self time of main
    d.sample(2, ["threading.run"], 100)  # nothing shown: root's own time
    profile = finish(prof)
    assert profile.mode == "sample"
    assert flat(profile, 0) == {
        "app.main": (4, 2750, 250, 0, 0),
        "app.main/app.work": (2, 2000, 2000, 0, 0),
        "app.main/app.hook": (1, 500, 500, 0, 0),
    }
    assert profile.threads[0].root.inclusive_ns == 2750
    assert profile.threads[1].root.inclusive_ns == 100
    assert profile.threads[1].name == "T2"


def test_paused_profiler_records_only_between_start_and_stop() -> None:
    clock = FakeClock()
    prof = EltProfiler(Settings(), clock=clock, standalone=False, paused=True)
    d = FakeDriver(prof, clock)
    d.leaf("app.attach_noise", 5)  # the collector's own start-up work
    prof.start_events()
    d.leaf("app.work", 7)
    prof.stop_events()
    d.leaf("app.detach_noise", 5)
    assert flat(finish(prof)) == {"app.work": (1, 7, 7, 7, 7)}


def test_silent_thread_writes_no_lines() -> None:
    prof, d, lines = make()
    prof.quiet_this_thread()  # a silent thread, as profkit's own flusher thread is
    d.leaf("app.work", 3)
    assert lines == []


def test_timeline_keeps_each_shown_call() -> None:
    prof, d, _ = make(timeline=True, basetime_ns=5)
    start = d.clock.now
    with d.call("app.main", 10):
        d.leaf("app.work", 20)
        d.leaf("app.tiny", 1)  # below the base time: no span
    profile = finish(prof)
    spans = [
        (profile.frames[s.frame].name, s.start_ns, s.end_ns, s.depth, s.thread)
        for s in profile.spans
    ]
    base = prof._started_ns
    assert spans == [
        ("app.main", start - base, start - base + 31, 0, 0),
        ("app.work", start - base + 10, start - base + 30, 1, 0),
    ]
    assert profile.metadata["timeline_spans_dropped"] == 0


def test_timeline_is_capped_and_counts_the_rest() -> None:
    prof, d, _ = make(timeline=True)
    prof._span_cap = 3
    # re-bind with the new cap, as initialize would (on whichever hot path is in use)
    prof.choose_recorder()
    for _ in range(5):
        d.leaf("app.work", 1)
    profile = finish(prof)
    assert len(profile.spans) == 3
    assert profile.metadata["timeline_spans_dropped"] == 2


def test_sampled_threads_carry_the_collectors_native_ids() -> None:
    """Sample mode learns a thread's name and OS id from the collector (the sampler runs
    on a thread of its own); an id it does not know gives a placeholder name, no OS id."""
    clock = FakeClock()
    prof = SamplingProfiler(Settings(prefixes=("app",)), clock=clock, standalone=False)
    d = FakeDriver(prof, clock)

    def thread_info(tid: ThreadId) -> ThreadInfo:
        if tid == 9:
            raise UnknownIdError("never seen")
        return ThreadInfo(tid, f"T{tid}", 5000 + tid, True)

    d.info.get_thread_info = thread_info  # type: ignore[method-assign]
    d.sample(1, ["app.main"], 1000)
    d.sample(9, ["app.main"], 1000)
    profile = finish(prof)
    got = {(t.thread_id, t.name, t.native_id) for t in profile.threads}
    assert got == {(1, "T1", 5001), (9, "Thread-9", None)}


def test_callbacks_are_handed_over_never_assigned_over_methods() -> None:
    """Issue 21 item 6: the recorder's callbacks go to the collector through
    ``call_events``; the profiler's own attributes never shadow a notification method."""
    for timeline in (False, True):
        for on_line in (None, [].append):
            prof = EltProfiler(Settings(timeline=timeline), standalone=False, on_line=on_line)
            d = FakeDriver(prof, FakeClock())
            events = prof.call_events()
            assert events is not None and events.function_enter is not None
            assert d.hook("function_enter") is events.function_enter
            names = ("function_", "python_to_", "native_to_")
            assert not [n for n in vars(prof) if n.startswith(names)]
    assert SamplingProfiler(Settings()).call_events() is None
