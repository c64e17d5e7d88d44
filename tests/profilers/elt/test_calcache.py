"""The calibration's cache (:mod:`profkit.profilers.elt.calcache`): costs kept per
interpreter and machine, never trusted blindly and never a reason for a run to fail.

No timings are asserted: the costs written here are made up, and the end-to-end test
only checks that a run used (or refreshed) what the cache held.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from profkit.api.events import EventMask
from profkit.calltree.file import load
from profkit.profilers.elt import calcache, native
from profkit.profilers.elt.calcache import CostCache
from profkit.profilers.elt.calibrate import Calibration, Costs

COSTS = [Costs(90.0, 200.0, 100.0, 130.0), Costs(80.0, 260.0, 95.0, 140.0), Costs(99, 210, 97, 120)]


def _cache(tmp_path: Path, variant: str = "auto c_calls=1 timeline=0") -> CostCache:
    found = CostCache.open(variant, None, {calcache.ENV: str(tmp_path / "cache")})
    assert found is not None
    return found


def test_used_once_enough_runs_measured_and_then_each_cost_least(tmp_path: Path) -> None:
    cache = _cache(tmp_path)
    assert cache.costs() is None  # nothing yet: measure
    for n, costs in enumerate(COSTS, 1):
        assert cache.add(costs, now=1000.0 + n)
        assert (cache.costs(now=1010.0) is None) == (n < calcache.MIN_RUNS)
    assert cache.costs(now=1010.0) == Costs(80.0, 200.0, 95.0, 120.0)


def test_old_measurements_stop_counting_and_only_the_newest_are_kept(tmp_path: Path) -> None:
    cache = _cache(tmp_path)
    for n, costs in enumerate(COSTS):
        cache.add(costs, now=1000.0 + n)
    later = 1000.0 + calcache.FRESH_S + 1.5
    assert cache.costs(now=later) is None  # stale: the machine is measured again
    for n in range(calcache.KEEP + 3):
        cache.add(Costs(50.0 + n, 1, 1, 1), now=later + n)
    kept = cache.entries()
    assert len(kept) == calcache.KEEP and kept[-1][1].python_callee == 50.0 + calcache.KEEP + 2


@pytest.mark.parametrize(
    "text",
    [
        "",
        "garbage\n",
        "\x00\xff" * 50,
        f"{calcache.HEADER}\nkey something else\n1000 1 2 3 4\n",  # another key
        "profkit calibration cache 0\n",  # another layout
    ],
    ids=["empty", "garbage", "binary", "other-key", "other-layout"],
)
def test_a_corrupt_or_foreign_file_is_ignored_and_rewritten(tmp_path: Path, text: str) -> None:
    cache = _cache(tmp_path)
    Path(cache.path).parent.mkdir(parents=True)
    Path(cache.path).write_bytes(text.encode("utf-8", "surrogateescape"))
    assert cache.entries() == [] and cache.costs() is None
    assert cache.add(COSTS[0], now=5.0)
    assert cache.entries() == [(5.0, COSTS[0])]


def test_implausible_values_are_not_believed(tmp_path: Path) -> None:
    cache = _cache(tmp_path)
    Path(cache.path).parent.mkdir(parents=True)
    bad = ["1 nan 1 1 1", "1 -5 1 1 1", "1 1e12 1 1 1", "1 inf 1 1 1", "x 1 1 1 1", "1 1 1 1"]
    lines = [calcache.HEADER, "key " + cache.key, *bad, "7 1 2 3 4"]
    Path(cache.path).write_text("\n".join(lines) + "\n")
    assert cache.entries() == [(7.0, Costs(1.0, 2.0, 3.0, 4.0))]


@settings(max_examples=60, deadline=None)
@given(cut=st.integers(0, 400), flips=st.lists(st.tuples(st.integers(0, 400), st.integers(0, 255))))
def test_truncated_or_mutated_files_never_raise(
    tmp_path_factory: pytest.TempPathFactory, cut: int, flips: list[tuple[int, int]]
) -> None:
    cache = _cache(tmp_path_factory.mktemp("c"))
    for n, costs in enumerate(COSTS):
        cache.add(costs, now=100.0 + n)
    data = bytearray(Path(cache.path).read_bytes()[:cut])
    for at, value in flips:
        if at < len(data):
            data[at] = value
    Path(cache.path).write_bytes(bytes(data))
    for _, costs in cache.entries():
        assert 0 <= costs.python_callee <= calcache.MAX_NS
    cache.costs(now=110.0)


def test_an_unwritable_place_is_no_error(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    found = CostCache.open("v", None, {calcache.ENV: str(blocker / "sub")})
    assert found is not None
    assert found.add(COSTS[0]) is False and found.costs() is None


def test_turned_off_and_where_it_lives() -> None:
    for off in ("0", "off", "No", "false"):
        assert calcache.directory({calcache.ENV: off}) is None
        assert CostCache.open("v", None, {calcache.ENV: off}) is None
    assert calcache.directory({calcache.ENV: "/x/y"}) == "/x/y"
    assert calcache.directory({"XDG_CACHE_HOME": "/c"}) == "/c/profkit/calibration"


def test_another_interpreter_or_variant_has_another_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    here = _cache(tmp_path)
    assert _cache(tmp_path, "auto c_calls=0 timeline=0").path != here.path
    monkeypatch.setattr(sys, "executable", "/other/python3")
    other = _cache(tmp_path)
    assert other.key != here.key and other.path != here.path
    monkeypatch.setattr(sys, "version", "3.99.0 (other build)")
    assert _cache(tmp_path).key not in (here.key, other.key)
    # a rebuilt C recorder (same path, new modification time) is another key too
    lib = tmp_path / "lib.so"
    lib.write_bytes(b"1")
    first = calcache.key("v", str(lib))
    os.utime(lib, ns=(1, 1))
    assert calcache.key("v", str(lib)) != first


def test_a_calibration_from_the_cache_measures_nothing(tmp_path: Path) -> None:
    cache = _cache(tmp_path)
    for costs in COSTS:
        cache.add(costs)
    cal = Calibration(cache=cache)
    cal.measure_bare()
    cal.run_profiled()
    assert cal.cached == Costs(80.0, 200.0, 95.0, 120.0)
    assert cal.thread is None and cal.bare == {} and cal.codes == frozenset()
    assert cal.summary() == {"cached": cache.path}
    cal.remember(COSTS[0])  # a cached calibration adds nothing
    assert len(cache.entries()) == len(COSTS)


def _run(tmp_path: Path, cache_dir: Path) -> dict[str, object]:
    script = tmp_path / "prog.py"
    script.write_text("def f():\n    pass\n\nfor _ in range(100):\n    f()\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROFKIT_")}
    env[calcache.ENV] = str(cache_dir)
    out = tmp_path / "p.json"
    subprocess.run(
        [sys.executable, "-m", "profkit", "run", "--no-tree", "-o", str(out), str(script)],
        capture_output=True,
        env=env,
        timeout=120,
        check=True,
    )
    meta = load(out).metadata["compensation"]
    assert isinstance(meta, dict)
    return meta


@pytest.mark.skipif(not native.available(), reason="the C recorder is not built")
def test_profkit_run_measures_until_the_cache_holds_enough_then_reads_it(tmp_path: Path) -> None:
    first = _run(tmp_path, tmp_path / "cache")
    assert first["applied"] is True and "bare_ns" in first["calibration"]  # type: ignore[operator]
    (kept,) = (tmp_path / "cache").iterdir()
    lines = kept.read_text().splitlines()
    assert lines[0] == calcache.HEADER and len(lines) == 3  # header, key, one measurement
    # As if many runs had measured: made-up costs, whose least values the next run uses.
    made_up = [f"{os.path.getmtime(kept):.0f} {n} {n + 1} {n + 2} {n + 3}" for n in (7, 5, 6)]
    kept.write_text("\n".join([*lines[:2], *made_up]) + "\n")
    cached = _run(tmp_path, tmp_path / "cache")
    assert cached["applied"] is True
    assert cached["calibration"] == {"cached": str(kept)}
    assert cached["cost_per_call_ns"] == {
        "python_callee": 5.0,
        "python_caller": 6.0,
        "c_callee": 7.0,
        "c_caller": 8.0,
    }


@pytest.mark.skipif(not native.available(), reason="the C recorder is not built")
def test_profkit_run_with_an_unwritable_cache_still_compensates(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    meta = _run(tmp_path, blocker)
    assert meta["applied"] is True and "bare_ns" in meta["calibration"]  # type: ignore[operator]


class _Info:
    """What for_run asks of a ProfilerInfo: the collector for a mask, recorded."""

    def __init__(self) -> None:
        self.asked: list[object] = []

    def backend_for(self, mask: object) -> str:
        self.asked.append(mask)
        return "evalframe" if mask == EventMask.ENTER_LEAVE else "setprofile"


@pytest.mark.parametrize(("c_calls", "backend"), [(False, "evalframe"), (True, "setprofile")])
def test_the_key_names_the_collector_auto_will_pick(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, c_calls: bool, backend: str
) -> None:
    # At initialize the session's backend_name is still "auto": on 3.11 that is evalframe
    # without C calls but setprofile with them (or beside another eval-frame function).
    monkeypatch.setenv(calcache.ENV, str(tmp_path / "cache"))
    info = _Info()
    cache = calcache.for_run(info, SimpleNamespace(c_calls=c_calls, timeline=False))  # type: ignore[arg-type]
    assert cache is not None
    assert info.asked == [EventMask.ENTER_LEAVE | (EventMask.CODE_TRANSITIONS * c_calls)]
    assert cache.key.endswith(f" | {backend} c_calls={c_calls:d} timeline=0"), cache.key


def test_a_session_s_info_answers_for_the_mask_before_it_runs() -> None:
    from profkit.collect.info import SessionInfo
    from profkit.collect.select import choose

    class _Session:
        backend = None
        requested_backend = "auto"
        catalog = None

    info = SessionInfo(_Session())  # type: ignore[arg-type]
    for mask in (EventMask.ENTER_LEAVE, EventMask.ENTER_LEAVE | EventMask.CODE_TRANSITIONS):
        assert info.backend_for(mask) == choose("auto", mask).name
    _Session.requested_backend = "nosuch"
    assert info.backend_for(EventMask.ENTER_LEAVE) == "nosuch"  # the attach says why
