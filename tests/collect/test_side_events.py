"""Threads, module loads, GC, transitions, arguments/return values, snapshots, sampling."""

from __future__ import annotations

import gc
import sys
import threading
import time
from pathlib import Path

import pytest

from profkit.api import EventMask
from profkit.api.errors import ImmutableFlagError, NotAvailableError, ProfilerApiError
from profkit.collect import attach, backends, detach
from tests.collect.capable import require
from tests.collect.recording import Recorder


def add(a: int, b: int = 2, *rest: int, **kw: int) -> int:
    return a + b


def uses_c(xs: list[int]) -> int:
    return len(xs) + sum(xs)


def test_threads_created_named_destroyed(backend: str) -> None:
    rec = Recorder(EventMask.THREADS)
    attach(rec, backend)
    t = threading.Thread(target=lambda: time.sleep(0.01), name="worker-1")
    t.start()
    t.name = "worker-2"
    t.join()
    detach()
    tid = t.ident
    assert ("thread_created", tid) in rec.events
    assert ("thread_name", tid, "worker-1") in rec.events
    assert ("thread_name", tid, "worker-2") in rec.events
    assert ("thread_destroyed", tid) in rec.events
    assert rec.events.index(("thread_created", tid)) < rec.events.index(("thread_destroyed", tid))
    assert threading.Thread._bootstrap_inner.__module__ == "threading"  # restored


def test_module_loads(backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "pk_mod_ok.py").write_text("X = 1\n")
    (tmp_path / "pk_mod_bad.py").write_text("raise RuntimeError('nope')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    rec = Recorder(EventMask.MODULE_LOADS)
    attach(rec, backend)
    import pk_mod_ok

    with pytest.raises(RuntimeError):
        import pk_mod_bad  # noqa: F401
    detach()
    sys.modules.pop("pk_mod_ok", None)
    sys.modules.pop("pk_mod_bad", None)
    assert ("module_started", "pk_mod_ok") in rec.events
    assert ("module_finished", "pk_mod_ok", str(tmp_path / "pk_mod_ok.py"), None) in rec.events
    assert (
        "module_finished",
        "pk_mod_bad",
        str(tmp_path / "pk_mod_bad.py"),
        "RuntimeError",
    ) in rec.events
    assert "exec_module" not in vars(sys.modules.get("pk_mod_ok", pk_mod_ok).__loader__)


def test_gc(backend: str) -> None:
    rec = Recorder(EventMask.GC)
    attach(rec, backend)
    gc.collect(1)
    detach()
    assert ("gc_started", 1) in rec.events
    assert any(e[0] == "gc_finished" and e[1] == 1 for e in rec.events)


def test_transitions(backend: str) -> None:
    require(backend, EventMask.CODE_TRANSITIONS)
    rec = Recorder(EventMask.ENTER_LEAVE | EventMask.CODE_TRANSITIONS)
    attach(rec, backend)
    uses_c([1, 2])
    detach()
    names = [(e[0], e[1]) for e in rec.events if e[0] in ("to_native", "to_python")]
    assert ("to_native", "len") in names and ("to_python", "len") in names
    assert ("to_native", "sum") in names
    assert names.index(("to_native", "len")) < names.index(("to_python", "len"))


def test_arguments_and_return_value(backend: str) -> None:
    mask = EventMask.ENTER_LEAVE | EventMask.FUNCTION_ARGS | EventMask.FUNCTION_RETVAL
    require(backend, mask)
    rec = Recorder(mask)
    attach(rec, backend)
    add(1, 5, 7, k=3)
    detach()
    assert ("args", "add", {"a": 1, "b": 5, "rest": (7,), "kw": {"k": 3}}) in rec.events
    assert ("retval", "add", 6) in rec.events


def test_immutable_flags_only_in_initialize(backend: str) -> None:
    rec = Recorder(EventMask.ENTER_LEAVE)
    session = attach(rec, backend)
    with pytest.raises(ImmutableFlagError):
        session.info.set_event_mask(EventMask.ENTER_LEAVE | EventMask.FUNCTION_ARGS)
    session.info.set_event_mask(EventMask.ENTER_LEAVE | EventMask.GC)  # mutable: fine
    assert session.info.get_event_mask() == EventMask.ENTER_LEAVE | EventMask.GC
    with pytest.raises(NotAvailableError):
        session.info.do_stack_snapshot(session.info.get_current_thread_id())
    detach()


def test_stack_snapshot_other_thread(backend: str) -> None:
    rec = Recorder(EventMask.ENABLE_STACK_SNAPSHOT)
    session = attach(rec, backend)
    ready, done = threading.Event(), threading.Event()

    def parked() -> None:
        ready.set()
        done.wait(5)

    t = threading.Thread(target=parked)
    t.start()
    ready.wait(5)
    stack = session.info.do_stack_snapshot(t.ident)  # type: ignore[arg-type]
    names = [session.info.get_function_info(f).name for f in stack]
    done.set()
    t.join()
    mine = [
        session.info.get_function_info(f).name
        for f in session.info.do_stack_snapshot(threading.get_ident())
    ]  # type: ignore[arg-type]
    detach()
    assert names[0] == "Thread._bootstrap"
    assert any(n.endswith(".parked") for n in names)
    assert not any("_install_threads" in n for n in names)
    assert mine[-1] == "test_stack_snapshot_other_thread"


def spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        add(1)


@pytest.mark.parametrize("clock", ["wall", "cpu"])
def test_sampling(clock: str) -> None:
    rec = Recorder(EventMask.SAMPLING)
    session = attach(rec, sample_interval=0.002, sample_clock=clock)
    assert session.backend == "sampler"
    ready = threading.Event()

    def sleeper() -> None:
        ready.wait(5)

    t = threading.Thread(target=sleeper)
    t.start()
    spin(0.2)
    ready.set()
    t.join()
    detach()
    mine = [e for e in rec.of("sample") if e[1] == threading.get_ident()]
    assert mine, rec.events[:5]
    assert any("spin" in e[2] for e in mine)
    assert all(e[3] > 0 for e in rec.of("sample"))
    theirs = [e for e in rec.of("sample") if e[1] == t.ident]
    if clock == "cpu" and hasattr(time, "pthread_getcpuclockid"):
        assert sum(e[3] for e in theirs) < sum(e[3] for e in mine)


def test_sampling_beside_tracing(backend: str) -> None:
    rec = Recorder(EventMask.SAMPLING | EventMask.ENTER_LEAVE)
    session = attach(rec, backend, sample_interval=0.002)
    assert session.backend == backend
    spin(0.1)
    detach()
    assert rec.of("sample") and rec.of("enter")


def test_one_profiler_per_process(backend: str) -> None:
    attach(Recorder(), backend)
    with pytest.raises(ProfilerApiError, match="already attached"):
        attach(Recorder(), backend)
    detach()
    attach(Recorder(), backend)  # allowed again after detach
    detach()


def test_bad_arguments() -> None:
    with pytest.raises(ProfilerApiError):
        attach(Recorder(), sample_clock="moon")
    with pytest.raises(ProfilerApiError):
        attach(Recorder(), "nonsense")


def test_docs_example_profiler_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """The 20-line profiler in docs/api.md works as printed."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "api.md").read_text()
    code = doc.split("```python\n", 1)[1].split("```", 1)[0]
    assert len(code.strip().splitlines()) <= 20
    namespace: dict[str, object] = {}
    exec(compile(code, "docs/api.md", "exec"), namespace)
    profiler = namespace["CallCounter"]()  # type: ignore[operator]
    attach(profiler)
    profiler.info.set_function_filter(lambda f: f.name == "add")  # type: ignore[attr-defined]
    for _ in range(3):
        add(1)
    detach()
    out = capsys.readouterr().out.split()
    assert out[0] == "3" and out[1].endswith(".add")


def reraiser() -> None:
    try:
        raise KeyError("k")
    except KeyError:
        raise


def handles() -> str:
    try:
        reraiser()
    except KeyError:
        return "handled"
    return "no"


def test_exception_notifications(backend: str) -> None:
    require(backend, EventMask.EXCEPTIONS)
    rec = Recorder(EventMask.ENTER_LEAVE | EventMask.EXCEPTIONS)
    attach(rec, backend)
    assert handles() == "handled"
    detach()
    kinds = [e[:2] for e in rec.events if e[0] in ("thrown", "caught", "reraised", "unwind")]
    assert ("unwind", "reraiser") in kinds
    if backends.capabilities(backend).full_exceptions:
        assert kinds == [
            ("thrown", "reraiser"),
            ("caught", "reraiser"),
            ("reraised", "reraiser"),
            ("unwind", "reraiser"),
            ("thrown", "handles"),
            ("caught", "handles"),
        ]


def test_concurrent_first_calls_one_first_execution(backend: str) -> None:
    """Callbacks are not serialized: 8 threads make the first call of 30 fresh functions at
    once; each still gets exactly one function_first_execution."""
    funcs = []
    for i in range(30):
        namespace: dict[str, object] = {}
        exec(f"def fresh_{i}(x):\n    return x + {i}\n", namespace)
        funcs.append(namespace[f"fresh_{i}"])
    rec = Recorder(EventMask.FIRST_EXECUTION | EventMask.ENTER_LEAVE)
    attach(rec, backend)
    barrier = threading.Barrier(8)

    def worker() -> None:
        barrier.wait()
        for f in funcs:
            f(1)  # type: ignore[operator]

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    detach()
    firsts = [e[1] for e in rec.of("first") if e[1].startswith("fresh_")]
    assert sorted(firsts) == sorted(f"fresh_{i}" for i in range(30))


def test_internal_threads_not_sampled() -> None:
    rec = Recorder(EventMask.SAMPLING)
    stop = threading.Event()

    def helper() -> None:
        while not stop.is_set():
            add(1)

    t = threading.Thread(target=helper)
    t.profkit_internal = True  # type: ignore[attr-defined]
    t.start()
    attach(rec, sample_interval=0.002)
    spin(0.1)
    detach()
    stop.set()
    t.join()
    sampled = {e[1] for e in rec.of("sample")}
    assert threading.get_ident() in sampled
    assert t.ident not in sampled
