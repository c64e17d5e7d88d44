"""The sampler loop on known-shape programs: modes, threads, exit, fork, exec."""

from __future__ import annotations

import pytest

from profkit.calltree.model import CallProfile
from profkit.sampler import SamplerOptions, SamplerSession
from tests.sampler.conftest import GENERATOR, all_targets, interpreter


def _sample(pid: int, **kw) -> tuple[SamplerSession, dict[int, CallProfile]]:
    kw.setdefault("duration", 0.6)
    session = SamplerSession(pid, SamplerOptions(**kw))
    try:
        session.run()
    finally:
        session.close()
    return session, session.profiles()


def _self_share(profile: CallProfile, suffix: str) -> float:
    """Share of all sampled time spent in functions named ``*suffix`` themselves."""
    total = sum(t.root.inclusive_ns for t in profile.threads)
    own = 0
    for t in profile.threads:
        for _, node in t.root.walk():
            if node.frame >= 0 and profile.frames[node.frame].name.endswith(suffix):
                own += node.exclusive_ns
    return own / total if total else 0.0


def _thread_time(profile: CallProfile) -> dict[str, int]:
    return {t.name: t.root.inclusive_ns for t in profile.threads}


@pytest.mark.parametrize("version", all_targets())
def test_tight_generator_is_seen_inside_the_generator(version, target):
    t = target(GENERATOR, interpreter(version))
    session, profiles = _sample(t.pid)
    profile = profiles[t.pid]
    share = _self_share(profile, ".gen")
    # A sanity bound only (issue #22 item 16: no share a loaded machine can miss): the
    # share is judged against py-spy in the same run by bench/sampler_bench.py.
    assert 0.02 < share < 0.98, share
    # A walk a yield cut keeps the generator and has its callers spliced on (issue #12):
    # gen's samples still sit under main, all but those whose callers were not found. On
    # 3.12 under load those were up to ~12 % of gen's samples: the target, stopped inside
    # the few instructions where its current frame is the generator but the generator's
    # previous is not (yet / any more) set, shows that on every read (3.11, 3.13: < 2 %).
    gen_ns = under_main = 0
    for th in profile.threads:
        for depth, node in th.root.walk():
            if node.frame >= 0 and profile.frames[node.frame].name.endswith(".gen"):
                gen_ns += node.exclusive_ns
                under_main += node.exclusive_ns if depth > 1 else 0
    # (0.75 held on an idle machine; an ASan run under load missed it: margin to 0.5)
    assert under_main >= 0.5 * gen_ns, (under_main, gen_ns)
    # Wall time is charged across late reads (test_weights.py checks the rule on a fake
    # clock; bench/sampler_truth.py --load N measures it against the program's clocks).
    # Here only a sanity bound: beside two busy loops one run charged main 0.56 s of
    # 1.03 s (194 of 1034 ticks; 0.9x failed, and 0.8x, issue #22 item 16).
    main = next(th for th in profile.threads if th.thread_id == t.pid)
    stats = session.stats
    assert main.root.inclusive_ns >= 0.2 * (stats.elapsed_ns - stats.unsampled_ns) - 0.1e9
    meta = profile.metadata
    assert meta["pid"] == t.pid and meta["python"].startswith(version)
    assert meta["sampler"]["lines"], "per-line samples are kept"


SPLIT = """
import threading, time
def spin(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass
def busy():
    while True:
        spin(1)
def idle():
    while True:
        time.sleep(1)
threading.Thread(target=busy, name="busy", daemon=True).start()
threading.Thread(target=idle, name="idle", daemon=True).start()
print("ready", flush=True)
idle()
"""


def test_modes_split_threads_as_documented(target):
    t = target(SPLIT)
    _, wall = _sample(t.pid, mode="wall")
    times = wall[t.pid].threads
    assert len(times) == 3
    # wall: every thread gets the whole duration (a torn read of one thread, more common
    # under load, leaves that thread out of one sample: a margin, not equality)
    totals = [th.root.inclusive_ns for th in times]
    assert max(totals) < 1.5 * min(totals)
    for mode in ("cpu", "active", "gil"):
        _, got = _sample(t.pid, mode=mode)
        profile = got[t.pid]
        names = {f.name for f in profile.frames}
        assert "__main__.spin" in names, mode
        busy_ns = sum(
            th.root.inclusive_ns
            for th in profile.threads
            if any(
                profile.frames[n.frame].name == "__main__.spin"
                for _, n in th.root.walk()
                if n.frame >= 0
            )
        )
        total = sum(th.root.inclusive_ns for th in profile.threads)
        assert busy_ns > 0, mode
        if mode == "cpu":
            # CPU time: the sleepers use next to none whatever the load, so the spinning
            # thread's share holds on a busy machine. Not so for `active` and `gil` (issue
            # #22 item 16: no share a loaded machine can miss): a sleeper woken while the
            # spinner holds the GIL is likely what stays runnable (state R) until a core is free,
            # long on a loaded machine; in a 0.6 s session under two CI runs the two
            # sleepers had half the total. There the test asserts only that the spinner is seen.
            assert busy_ns > 0.6 * total, (mode, busy_ns, total)


def test_thread_names_and_native_ids(target):
    t = target(SPLIT)
    _, profiles = _sample(t.pid, duration=0.3)
    profile = profiles[t.pid]
    ids = {th.thread_id for th in profile.threads}
    assert t.pid in ids  # the main thread's native id is the pid
    import os

    assert ids <= {int(x) for x in os.listdir(f"/proc/{t.pid}/task")}
    assert profile.threads[0].thread_id == t.pid
    # and the saved profile says so, for the exports (Chrome tid, pprof labels)
    assert all(th.native_id == th.thread_id for th in profile.threads)


def test_target_exiting_mid_sample_ends_cleanly(target):
    t = target(
        """
        import time
        print("ready", flush=True)
        end = time.time() + 0.3
        while time.time() < end:
            pass
        """
    )
    session, profiles = _sample(t.pid, duration=120)
    assert session.stats.elapsed_ns < 100e9  # ended by the exit, not the duration
    assert session.recorders[t.pid].ended == "exited"
    assert profiles[t.pid].threads


def test_forked_child_is_followed(target):
    t = target(
        """
        import os, time
        def parent_loop():
            while True:
                time.sleep(0.01)
        def child_loop():
            end = time.time() + 120  # a bound: the test releases it once it was sampled
            while time.time() < end and not os.path.exists("release"):
                pass
            os._exit(0)
        print("ready", flush=True)
        time.sleep(0.2)
        if os.fork() == 0:
            child_loop()
        parent_loop()
        """
    )

    def both_seen(session) -> bool:
        recs = session.recorders
        child = [r for pid, r in recs.items() if pid != t.pid and _in(r, "__main__.child_loop")]
        return bool(child) and _in(recs[t.pid], "__main__.parent_loop")

    # Until both were sampled, not for a fixed 0.9 s (issue #22 item 16); 120 s bounds it.
    session = SamplerSession(t.pid, SamplerOptions(duration=120))
    try:
        session.run(until=lambda: both_seen(session))
    finally:
        session.close()
        (t.script.parent / "release").touch()
    profiles = session.profiles()
    children = [pid for pid in profiles if pid != t.pid]
    assert len(children) == 1
    child = profiles[children[0]]
    assert any(f.name == "__main__.child_loop" for f in child.frames)
    assert any(f.name == "__main__.parent_loop" for f in profiles[t.pid].frames)


def _names(rec):
    """The code of every stack ``rec`` has samples of (a first read only sets a baseline)."""
    return [info for e in rec.entries.values() if e.samples for info, _ in e.stack]


def _in(rec, name: str) -> bool:
    return any(info.name == name for info in _names(rec))


def test_children_forked_one_after_another_are_each_followed(target, tmp_path):
    """Five children forked one after the other are each found and sampled.

    Each child runs until the session has sampled it inside ``short_child`` (the test then
    releases it), so no share of a look interval decides the outcome: on a loaded machine
    (issue #22, item 16) the old version, five children of 50 ms each, lost two or three of
    them. How short a child may live and still be followed (the CHILD_LOOK_S floor) is a
    timing and is measured in bench/sampler_children_bench.py against a long-lived peer."""
    from profkit.sampler.session import CHILD_LOOK_S

    assert CHILD_LOOK_S <= 0.02
    t = target(
        """
        import os, time
        def short_child():
            give_up = time.time() + 120  # a bound against hanging: the test releases it
            while not os.path.exists(f"release-{os.getpid()}") and time.time() < give_up:
                pass
            os._exit(0)
        print("ready", flush=True)
        for _ in range(5):
            pid = os.fork()
            if pid == 0:
                short_child()
            os.waitpid(pid, 0)
        while True:
            time.sleep(0.01)
        """
    )
    released: set[int] = set()

    def release(session) -> None:
        for pid, rec in list(session.recorders.items()):
            if pid != t.pid and pid not in released and _in(rec, "__main__.short_child"):
                (t.script.parent / f"release-{pid}").touch()
                released.add(pid)

    session = SamplerSession(t.pid, SamplerOptions(duration=240))
    try:
        session.run(on_tick=release, every_s=0.0, until=lambda: len(released) == 5)
    finally:
        session.close()
    profiles = session.profiles()
    children = [p for pid, p in profiles.items() if pid != t.pid]
    assert len(children) == 5, sorted(profiles)
    for child in children:
        assert any(f.name == "__main__.short_child" for f in child.frames)


def test_exec_of_a_non_python_program_ends_that_process(target):
    t = target(
        """
        import os, time
        print("ready", flush=True)
        end = time.time() + 0.2
        while time.time() < end:
            pass
        os.execv("/bin/sleep", ["sleep", "2"])
        """
    )
    # Until the exec is seen (a bound of 120 s, not a timing: issue #22 item 16)
    session = SamplerSession(t.pid, SamplerOptions(duration=120))
    try:
        session.run(until=lambda: bool(session.recorders[t.pid].ended))
    finally:
        session.close()
    profiles = session.profiles()
    rec = session.recorders[t.pid]
    assert rec.ended.startswith("exec'd a non-Python program"), rec.ended
    assert profiles[t.pid].threads  # what was sampled before the exec is kept


def test_exec_of_python_keeps_sampling(target):
    import sys

    t = target(
        f"""
        import os, sys, time
        print("ready", flush=True)
        end = time.time() + 0.2
        while time.time() < end:
            pass
        os.execv({sys.executable!r}, [{sys.executable!r}, "-c",
                 "import time\\ndef after():\\n    time.sleep(5)\\nafter()"])
        """
    )
    # Until the new program is sampled in after() (0.8 s once: a loaded machine took longer
    # than that to start it; issue #22 item 16), with a bound of 120 s against hanging.
    session = SamplerSession(t.pid, SamplerOptions(duration=120))
    rec = session.recorders[t.pid]
    try:
        session.run(until=lambda: any(i.name.endswith("after") for i in _names(rec)))
    finally:
        session.close()
    profiles = session.profiles()
    assert rec.execs == 1 and rec.ended == "stopped"
    assert any(f.name.endswith("after") for f in profiles[t.pid].frames)
