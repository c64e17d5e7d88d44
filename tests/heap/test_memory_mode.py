"""``profkit run --mode memory`` end to end: the right functions in the right proportions, the
three views and their totals, the program unchanged, bad values refused (issue #15 item 3)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from profkit.calltree import file as profile_file
from profkit.calltree.model import CallProfile
from profkit.heap import native_available

pytestmark = pytest.mark.skipif(
    not native_available(), reason="the allocation hooks (_heaphook) were not built"
)

RUN = [sys.executable, "-m", "profkit", "run", "--no-tree", "--mode", "memory"]
MiB = 1024 * 1024

#: Known allocations: big() 24 MiB and churn() 40 MiB of 1 MiB buffers (each one far above
#: the sampling mean, so each is sampled with weight = its size: exact), small() ~ 8 MB of
#: small dicts and strings (sampled: an estimate). big's buffers stay alive to the end (the
#: leak), churn's are freed at once; the peak is big's 24 MiB plus a buffer of churn's.
PROGRAM = """\
import sys
keep = []

def big():
    for _ in range(24):
        keep.append(bytearray(1024 * 1024))

def small():
    out = [{"i": i, "s": str(i) * 3} for i in range(30_000)]
    return len(out)

def churn():
    for _ in range(40):
        buffer = bytearray(1024 * 1024)
        del buffer

big()
print("small", small())
churn()
sys.stdout.flush()
sys.exit(7)
"""


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROFKIT_")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env | extra


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*RUN, *args], cwd=cwd, env=_env(), capture_output=True, text=True, timeout=120
    )


def _self_bytes(profile: CallProfile) -> dict[str, int]:
    out: dict[str, int] = {}
    for thread in profile.threads:
        for _, node in thread.root.walk():
            if node.frame >= 0:
                # 3.11 runs a comprehension as a function of its own: count it as its caller's
                name = profile.frames[node.frame].name.split(".<locals>.")[0]
                out[name] = out.get(name, 0) + node.exclusive_ns
    return out


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[CallProfile, str, int]:
    where = tmp_path_factory.mktemp("memory")
    (where / "app.py").write_text(PROGRAM)
    out = _run(["--alloc-sample", "64k", "-o", "out.json", "app.py"], where)
    assert out.stderr.count("Traceback") == 0, out.stderr
    return profile_file.load(str(where / "out.json")), out.stdout, out.returncode


def test_the_program_output_and_status_are_unchanged(
    recorded: tuple[CallProfile, str, int],
) -> None:
    _, stdout, status = recorded
    assert stdout == "small 30000\n"
    assert status == 7


def test_functions_get_their_allocated_bytes(recorded: tuple[CallProfile, str, int]) -> None:
    profile, _, _ = recorded
    assert profile.mode == "memory"
    assert profile.metadata["metric"] == "alloc_bytes"
    assert profile.metadata["alloc_sample_bytes"] == 64 * 1024
    by = _self_bytes(profile)
    # 1 MiB buffers with a 64 KiB mean: each is sampled (p = 1 - e^-16), weight ~ size.
    assert by["__main__.big"] == pytest.approx(24 * MiB, rel=0.02)
    assert by["__main__.churn"] == pytest.approx(40 * MiB, rel=0.02)
    # ~30,000 dicts, strings and the list: several MB, estimated from ~100 samples.
    assert 3 * MiB < by["__main__.small"] < 16 * MiB
    # nothing of profkit's own (runner, collector, detach) is in the profile
    assert not [name for name in by if name.startswith("profkit.")]


def test_peak_and_leaked_views(recorded: tuple[CallProfile, str, int]) -> None:
    profile, _, _ = recorded
    meta = profile.metadata
    assert meta["allocated_bytes"] == pytest.approx(sum(_self_bytes(profile).values()), rel=1e-6)
    # big's 24 MiB stays alive; churn adds one buffer at a time
    assert 24 * MiB <= meta["peak_bytes"] <= 24 * MiB + 14 * MiB
    assert meta["leaked_bytes"] == pytest.approx(24 * MiB, rel=0.05)
    frames = profile.frames
    leaked = {
        frames[stack[-1]].name: weight for stack, _n, weight in meta["memory_views"]["leaked"]
    }
    assert leaked["__main__.big"] == pytest.approx(24 * MiB, rel=0.02)
    assert "__main__.churn" not in leaked


def test_the_saved_file_is_json_a_reader_can_check(
    recorded: tuple[CallProfile, str, int], tmp_path: Path
) -> None:
    profile, _, _ = recorded
    path = tmp_path / "again.json"
    profile_file.save(profile, str(path))
    doc = json.loads(path.read_text())
    assert doc["mode"] == "memory"
    assert profile_file.load(str(path)) == profile


@pytest.mark.parametrize("value", ["0", "-5", "lots", "2TiB", "1e400"])
def test_a_bad_alloc_sample_is_refused(value: str, tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text("print('ran')\n")
    out = _run([f"--alloc-sample={value}", "app.py"], tmp_path)
    assert out.returncode == 2
    assert out.stdout == ""
    lines = out.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("profkit: error: "), out.stderr
    assert "alloc-sample" in lines[0]


def test_the_environment_variable_sets_the_mean(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text("x = [bytearray(100_000) for _ in range(10)]\n")
    out = subprocess.run(
        [*RUN, "-o", "out.json", "app.py"],
        cwd=tmp_path,
        env=_env(PROFKIT_ALLOC_SAMPLE="4KiB"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    profile = profile_file.load(str(tmp_path / "out.json"))
    assert profile.metadata["alloc_sample_bytes"] == 4096
    assert profile.metadata["allocated_bytes"] == pytest.approx(1_000_000, rel=0.1)


def test_a_child_process_saves_its_own_memory_profile(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text(
        "import subprocess, sys\n"
        "subprocess.run([sys.executable, '-c', "
        "'x = [bytearray(3_000_000) for _ in range(4)]; print(\"child\")'], check=True)\n"
        "print('parent')\n"
    )
    out = _run(["--alloc-sample", "64k", "-o", "out.json", "app.py"], tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "child\nparent\n"
    children = [p for p in tmp_path.glob("out.*.json")]
    assert len(children) == 1
    child = profile_file.load(str(children[0]))
    assert child.mode == "memory"
    assert child.metadata["allocated_bytes"] == pytest.approx(12_000_000, rel=0.05)


def test_call_recording_flags_are_noted_as_trace_mode_only(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text("print('ran')\n")
    out = _run(["--timeline", "-o", "out.json", "app.py"], tmp_path)
    assert out.returncode == 0 and out.stdout == "ran\n"
    assert "trace mode only" in out.stderr


def test_a_forked_child_saves_its_own_allocations(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text(
        "import os, sys\n"
        "keep = [bytearray(1_000_000) for _ in range(3)]\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    more = [bytearray(2_000_000) for _ in range(4)]\n"
        "    print('child', flush=True)\n"
        "    sys.exit(0)\n"
        "os.waitpid(pid, 0)\n"
        "print('parent')\n"
    )
    out = _run(["--alloc-sample", "64k", "-o", "out.json", "app.py"], tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "child\nparent\n"
    parent = profile_file.load(str(tmp_path / "out.json"))
    (child_path,) = tmp_path.glob("out.*.json")
    child = profile_file.load(str(child_path))
    assert parent.metadata["allocated_bytes"] == pytest.approx(3_000_000, rel=0.05)
    # the child's own 8 MB; what the parent allocated before the fork is the parent's
    assert child.metadata["allocated_bytes"] == pytest.approx(8_000_000, rel=0.05)
    assert child.metadata["pid"] != parent.metadata["pid"]
