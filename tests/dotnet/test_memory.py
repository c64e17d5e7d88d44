"""``profkit run --mode memory app.dll`` on the real CoreCLR 3.1 runtime (GCAllocationTick).

The program (``programs/Allocs.cs``) counts its own bytes; no test asserts a ratio or a
total a busy machine could shift (a late session sees fewer rounds): the 3:1 ratio and the
bytes against the program's own count are ``bench/dotnet_memory_bench.py``'s. These check
the order (the bigger method first), the metadata, the exports' byte weights, ``--prefix``,
threads kept apart, and that the program's output and exit status stay its own.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from profkit.calltree.file import load
from profkit.calltree.model import CallNode, CallProfile
from profkit.dotnet.nettracefile import profile_of_file
from tests.dotnet.conftest import PROGRAMS, RUNTIMECONFIG, profkit


@pytest.fixture(autouse=True)
def eventpipe_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    """These test the EventPipe engine; the native one (the default) is tests/clr/test_alloc.py's."""
    monkeypatch.setenv("PROFKIT_DOTNET_MEMORY", "events")


@pytest.fixture(scope="module")
def allocs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The compiled ``Allocs.dll`` (never committed)."""
    mcs = shutil.which("mcs")
    if mcs is None:
        pytest.skip("mono's C# compiler (mcs) is not installed (apt-get install mono-mcs)")
    out = tmp_path_factory.mktemp("dotnet-memory")
    target = out / "Allocs.dll"
    proc = subprocess.run(
        [mcs, "-nologo", "-optimize+", f"-out:{target}", str(PROGRAMS / "Allocs.cs")],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise AssertionError(f"mcs failed:\n{proc.stdout}{proc.stderr}")
    (out / "Allocs.runtimeconfig.json").write_text(json.dumps(RUNTIMECONFIG))
    return target


def inclusive(profile: CallProfile, name: str) -> int:
    """Bytes under every frame called ``name`` (outermost occurrence per path)."""
    total = 0
    for thread in profile.threads:
        pending: list[CallNode] = list(thread.root.children.values())
        while pending:
            node = pending.pop()
            if profile.frames[node.frame].name == name:
                total += node.inclusive_ns
            else:
                pending.extend(node.children.values())
    return total


def test_the_bigger_allocator_comes_first(allocs: Path, dotnet: str, tmp_path: Path) -> None:
    out = tmp_path / "m.json"
    bare = subprocess.run([dotnet, str(allocs), "ratio", "40"], capture_output=True, text=True)
    done = profkit(
        "run", "--mode", "memory", "--prefix", "AllocTest", "-o", str(out), str(allocs),
        "ratio", "40",
    )  # fmt: skip
    assert done.returncode == bare.returncode == 0, done.stderr
    assert done.stdout == bare.stdout == "ratio done\n"
    assert "counts big=" in done.stderr  # the program's own stderr passes through
    profile = load(out)
    meta = profile.metadata
    assert profile.mode == "memory" and meta["metric"] == "alloc_bytes"
    assert meta["unit"] == "bytes" and meta["alloc_samples"] > 0
    big = inclusive(profile, "AllocTest.Work.Big")
    small = inclusive(profile, "AllocTest.Work.Small")
    assert big > small > 0
    names = {f.name for f in profile.frames}
    assert all(n.startswith(("AllocTest.", "[type ")) for n in names), names  # --prefix
    assert {"[type System.Byte[]]", "[type System.String]"} <= names
    types = {t["type"] for t in meta["memory_types"]}
    assert {"System.Byte[]", "System.String"} <= types
    assert sum(t.root.inclusive_ns for t in profile.threads) == meta["allocated_bytes"]
    assert meta["gc"]["count"] >= 0 and "peak" in meta["not_available"]


def test_exports_weigh_bytes_and_peak_is_refused(allocs: Path, dotnet: str, tmp_path: Path) -> None:
    out = tmp_path / "m.json"
    done = profkit("run", "--mode", "memory", "-o", str(out), str(allocs), "ratio", "10")
    assert done.returncode == 0, done.stderr
    total = load(out).metadata["allocated_bytes"]
    collapsed = profkit("export", "-F", "collapsed", "-o", "-", str(out))
    assert collapsed.returncode == 0, collapsed.stderr
    weights = [int(line.rpartition(" ")[2]) for line in collapsed.stdout.splitlines()]
    assert sum(weights) == total
    peak = profkit("report", "--metric", "peak", str(out))
    assert peak.returncode == 2
    assert peak.stderr.startswith("profkit: error:") and len(peak.stderr.splitlines()) == 1


def test_threads_are_kept_apart(allocs: Path, dotnet: str, tmp_path: Path) -> None:
    out = tmp_path / "m.json"
    done = profkit(
        "run", "--mode", "memory", "--prefix", "AllocTest", "-o", str(out), str(allocs),
        "threads", "10",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    profile = load(out)
    holders: dict[str, set[int]] = {"AllocTest.Work.Big": set(), "AllocTest.Work.Small": set()}
    for thread in profile.threads:
        pending = list(thread.root.children.values())
        while pending:
            node = pending.pop()
            name = profile.frames[node.frame].name
            if name in holders:
                holders[name].add(thread.thread_id)
            pending.extend(node.children.values())
    assert holders["AllocTest.Work.Big"] and holders["AllocTest.Work.Small"]
    assert not holders["AllocTest.Work.Big"] & holders["AllocTest.Work.Small"]


@pytest.mark.parametrize("args", [("exit", "7"), ("oom",)])
def test_exit_and_out_of_memory_keep_their_status(
    allocs: Path, dotnet: str, tmp_path: Path, args: tuple[str, ...]
) -> None:
    out = tmp_path / "m.json"
    bare = subprocess.run([dotnet, str(allocs), *args], capture_output=True, text=True)
    done = profkit("run", "--mode", "memory", "-o", str(out), str(allocs), *args)
    assert bare.returncode != 0
    assert done.returncode == bare.returncode, done.stderr
    assert done.stdout == bare.stdout
    if out.exists():  # a session that started in time saved what it saw
        assert load(out).mode == "memory"
    else:
        assert "no allocations seen" in done.stderr


@pytest.mark.parametrize("suffix", [".json", ".nettrace"])
def test_attach_mode_memory(allocs: Path, dotnet: str, tmp_path: Path, suffix: str) -> None:
    proc = subprocess.Popen([dotnet, str(allocs), "loop", "60"], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        out = tmp_path / f"a{suffix}"
        done = profkit("attach", "--mode", "memory", "-d", "2", "-o", str(out), str(proc.pid))
        assert done.returncode == 0, done.stderr
        assert proc.poll() is None  # still running: attach leaves it be
        if suffix == ".nettrace":  # the raw stream: report reads it as a memory profile
            shown = profkit("report", str(out))
            if "GCAllocationTick events" in shown.stderr:  # none came in 2 s: starved
                return
            assert shown.returncode == 0, shown.stderr
            assert "[type " in shown.stdout
            profile = profile_of_file(str(out))
        else:
            profile = load(out)
        assert profile.mode == "memory" and profile.metadata["metric"] == "alloc_bytes"
        if profile.metadata["alloc_samples"]:  # a starved machine may deliver none in 2 s
            names = {f.name for f in profile.frames}
            assert "AllocTest.Work.Big" in names or "AllocTest.Work.Small" in names
    finally:
        proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def test_attach_mode_memory_on_python_is_refused() -> None:
    done = profkit("attach", "--mode", "memory", "-d", "1", str(os.getpid()))
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "for .NET programs" in done.stderr
