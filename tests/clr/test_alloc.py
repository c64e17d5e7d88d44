"""``profkit run --mode memory app.dll`` through libprofkit_clr's ObjectAllocated (the
default engine), on the real CoreCLR 3.1 runtime.

The program (``programs/AllocLife.cs``) allocates bytes and keeps objects alive by
construction. Samples are random, so each check has a margin no machine load can move:
the counts depend on the program and the sampling draw, never on timing; a small mean
(``--alloc-sample``) gives thousands of samples, so the margins are many
standard deviations wide. Objects of at least the mean are exact (the 64 MiB held).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from profkit.calltree.file import load
from profkit.calltree.model import CallProfile
from profkit.clr.host import Host
from tests.clr.conftest import profkit_cli
from tests.dotnet.test_memory import inclusive

MEAN = 16 * 1024  # ~4000 samples a 64 MB run: a method's estimate within a few %


@pytest.fixture(scope="module")
def life(compile_program: Callable[[str], Path], dotnet_host: Host, profiler_library: str) -> Path:
    return compile_program("AllocLife")


def run(
    life: Path, tmp_path: Path, *args: str, mean: int | None = MEAN, **extra: str
) -> subprocess.CompletedProcess[str]:
    """``profkit run --mode memory`` of AllocLife (``mean=None``: the default mean;
    ``extra``: environment variables)."""
    env = {k: v for k, v in os.environ.items() if k != "PROFKIT_DOTNET_MEMORY"} | extra
    out = tmp_path / "m.json"
    sample = ["--alloc-sample", str(mean)] if mean is not None else []
    return subprocess.run(
        [*profkit_cli(), "run", "--mode", "memory", *sample, "--prefix",
         "AllocLife", "-o", str(out), str(life), *args],
        capture_output=True, text=True, env=env, timeout=240,
    )  # fmt: skip


def under(profile: CallProfile, name: str, view: str | None = None) -> int:
    """Bytes under frame ``name``: in the trees, or in a metadata view's rows."""
    if view is not None:
        index = {f.name: i for i, f in enumerate(profile.frames)}.get(name)
        rows = profile.metadata["memory_views"][view]
        return sum(w for stack, _n, w in rows if index in stack)
    return inclusive(profile, name)


def bare(dotnet_host: Host, life: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([dotnet_host.path, str(life), *args], capture_output=True, text=True)


def test_allocation_ratio_and_exact_total(life: Path, dotnet_host: Host, tmp_path: Path) -> None:
    done = run(life, tmp_path, "ratio", "20")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "ratio done\n"
    profile = load(tmp_path / "m.json")
    meta = profile.metadata
    assert profile.mode == "memory" and meta["metric"] == "alloc_bytes"
    assert meta["profiler"].startswith("libprofkit_clr")
    three, one = under(profile, "AllocLife.Work.Three"), under(profile, "AllocLife.Work.One")
    assert 2.4 < three / one < 3.75, (three, one)  # 3 by construction
    own = 20 * 1000 * (3000 + 1000)  # the arrays' payloads; headers add 24 B each
    assert 0.8 * own < three + one < 1.25 * own
    assert meta["runtime_allocated_bytes"] >= own  # exact: every object's size
    assert meta["alloc_sample_bytes"] == MEAN and meta["alloc_samples"] > 1000
    types = {t["type"] for t in meta["memory_types"]}
    assert "System.Byte[]" in types
    assert sum(t.root.inclusive_ns for t in profile.threads) == meta["allocated_bytes"]
    collapsed = subprocess.run(
        [*profkit_cli(), "export", "-F", "collapsed", "-o", "-", str(tmp_path / "m.json")],
        capture_output=True, text=True,
    )  # fmt: skip
    assert collapsed.returncode == 0, collapsed.stderr
    weights = [int(line.rpartition(" ")[2]) for line in collapsed.stdout.splitlines()]
    assert sum(weights) == meta["allocated_bytes"]


def test_methods_of_different_types_are_exact_at_the_default_mean(
    life: Path, tmp_path: Path
) -> None:
    """Post-stratification: Wides and Narrows allocate one class each, so each method's
    bytes are its stratum's exact total, whatever the samples (400 rounds: ~25 samples of
    Narrow at the default 512 KiB, none is e**-25 unlikely). Nothing here depends on timing."""
    done = run(life, tmp_path, "types", "400", mean=None)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "types done\n"
    profile = load(tmp_path / "m.json")
    meta = profile.metadata
    assert meta["alloc_sample_bytes"] == 512 * 1024
    assert meta["alloc_estimator"] == "post-stratified by (type, size class)"
    types = {t["type"]: t for t in meta["memory_types"]}
    wide, narrow = types["AllocLife.Wide"], types["AllocLife.Narrow"]
    assert wide["objects"] == narrow["objects"] == 400 * 1000  # the runtime's exact counts
    assert wide["bytes"] == 3 * narrow["bytes"]  # 10 longs and 2, with the object header
    assert wide["bytes"] % wide["objects"] == 0 and narrow["bytes"] % narrow["objects"] == 0
    assert meta["allocated_bytes"] == meta["runtime_allocated_bytes"]  # totals exact too
    wides, narrows = (
        under(profile, "AllocLife.Work.Wides"),
        under(profile, "AllocLife.Work.Narrows"),
    )
    if meta["stack_failures"] == 0:  # every sample's stack seen: the split is exact
        assert (wides, narrows) == (wide["bytes"], narrow["bytes"])
    else:
        assert 0.95 < wides / wide["bytes"] <= 1 and 0.95 < narrows / narrow["bytes"] <= 1


def test_peak_held_by_a_list_of_large_arrays(life: Path, tmp_path: Path) -> None:
    done = run(life, tmp_path, "hold")
    assert done.returncode == 0, done.stderr
    profile = load(tmp_path / "m.json")
    meta = profile.metadata
    assert 64 * 2**20 <= meta["peak_bytes"] <= 128 * 2**20
    assert under(profile, "AllocLife.Work.Hold", "peak") >= 64 * 2**20  # exact: >= the mean
    assert meta["leaked_bytes"] < 2**20  # dropped before the end
    report = subprocess.run(
        [*profkit_cli(), "report", "--metric", "peak", str(tmp_path / "m.json")],
        capture_output=True, text=True,
    )  # fmt: skip
    assert report.returncode == 0 and "AllocLife.Work.Hold" in report.stdout + report.stderr


def test_objects_moved_by_a_compacting_gc_stay_attributed(life: Path, tmp_path: Path) -> None:
    done = run(life, tmp_path, "compact")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "kept 4000\n"
    profile = load(tmp_path / "m.json")
    meta = profile.metadata
    assert meta["followed"]["moved_by_gc"] > 0 and meta["followed"]["died"] > 0
    kept = 4000 * 4024  # alive to the end, moved by the compacting GC
    assert 0.75 * kept < under(profile, "AllocLife.Work.Keep", "leaked") < 1.3 * kept
    assert under(profile, "AllocLife.Work.Churn", "leaked") < 2**20  # GC.Collect() by the program
    assert meta["gc"]["count"] >= 2
    induced = [gc for gc in meta["gc"]["collections"] if gc["reason"] == "induced"]
    assert induced and all(gc["pause_ns"] > 0 for gc in induced)  # GC.Collect()'s, paused


def test_threads_are_kept_apart(life: Path, tmp_path: Path) -> None:
    done = run(life, tmp_path, "threads", "10")
    assert done.returncode == 0, done.stderr
    profile = load(tmp_path / "m.json")
    holders: dict[str, set[int]] = {"AllocLife.Work.Three": set(), "AllocLife.Work.One": set()}
    for thread in profile.threads:
        pending = list(thread.root.children.values())
        while pending:
            node = pending.pop()
            if profile.frames[node.frame].name in holders:
                holders[profile.frames[node.frame].name].add(thread.thread_id)
            pending.extend(node.children.values())
    assert holders["AllocLife.Work.Three"] and holders["AllocLife.Work.One"]
    assert not holders["AllocLife.Work.Three"] & holders["AllocLife.Work.One"]
    rows = profile.metadata["memory_threads"]
    assert len([r for r in rows if r["allocated_bytes"] > 0]) >= 2


@pytest.mark.parametrize("args", [("exit", "7"), ("crash",), ("oom",)])
def test_program_ends_its_own_way_and_the_profile_is_saved(
    life: Path, dotnet_host: Host, tmp_path: Path, args: tuple[str, ...]
) -> None:
    plain = bare(dotnet_host, life, *args)
    done = run(life, tmp_path, *args)
    assert plain.returncode != 0
    assert done.returncode == plain.returncode, done.stderr
    assert done.stdout == plain.stdout
    profile = load(tmp_path / "m.json")
    assert profile.mode == "memory"
    assert under(profile, "AllocLife.Work.Keep") > 0


@pytest.mark.parametrize(
    ("refuse", "said"),
    [
        ("0x00800000", "refused COR_PRF_ENABLE_OBJECT_ALLOCATED, needed to record allocations"),
        ("0x10000000", "refused COR_PRF_ENABLE_STACK_SNAPSHOT"),
        ("0x00800100", "refused the event mask"),  # two flags: no one flag to blame
    ],
)
def test_a_refused_flag_is_one_line_and_the_program_runs_unprofiled(
    life: Path, dotnet_host: Host, tmp_path: Path, refuse: str, said: str
) -> None:
    """The runtime refusing a flag (an older one, the immutable ones), as the test-only
    PROFKIT_CLR_TEST_REFUSE makes it: one line naming it; the program's output and status."""
    plain = bare(dotnet_host, life, "exit", "7")
    done = run(life, tmp_path, "exit", "7", PROFKIT_CLR_TEST_REFUSE=refuse)
    assert (done.returncode, done.stdout) == (plain.returncode, plain.stdout) == (7, "exiting\n")
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("profkit: clr: this runtime ") and said in lines[0]
    assert lines[0].endswith("the program runs unprofiled")
    assert not (tmp_path / "m.json").exists()


def test_the_eventpipe_engine_stays_reachable(life: Path, tmp_path: Path) -> None:
    env = dict(os.environ, PROFKIT_DOTNET_MEMORY="events")
    out = tmp_path / "e.json"
    done = subprocess.run(
        [*profkit_cli(), "run", "--mode", "memory", "-o", str(out), str(life), "ratio", "5"],
        capture_output=True, text=True, env=env, timeout=240,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "PROFKIT_DOTNET_MEMORY=events" in done.stderr
    if out.exists():  # the session may start too late for so short a run
        assert "EventPipe" in load(out).metadata["profiler"]
