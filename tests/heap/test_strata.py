"""Post-stratification: the hooks tally every allocation's bytes by size class exactly, and a
profile's sample weights are scaled so each class's add up to its exact bytes.

Only what is deterministic is asserted: tallies against allocations the test makes (sizes
the interpreter fixes), and a class only one function allocates in getting exactly its bytes
whatever samples fell where; shares that depend on sampling luck are the bench's
(bench/memory_bench.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from profkit.api.strata import Strata, Stratum
from profkit.heap import Allocation, AllocationSampler, build_profile, native_available
from profkit.heap.profile import UNATTRIBUTED
from profkit.heap.sampler import allocation_strata

needs_native = pytest.mark.skipif(not native_available(), reason="C hooks not built")

#: bytes(n) is one allocation of exactly sys.getsizeof(bytes(n)) bytes (no GC header)
BIG = 3000  # 3033 bytes: size class 11, [2048, 4096)
SMALL = 200  # 233 bytes: size class 7, [128, 256)
N_BIG = 2_000
N_SMALL = 20_000


def make_big(out: list[object]) -> None:
    for i in range(len(out)):
        out[i] = bytes(BIG)


def make_small(out: list[object]) -> None:
    for i in range(len(out)):
        out[i] = bytes(SMALL)


@pytest.fixture
def sampler() -> Iterator[list[AllocationSampler]]:
    made: list[AllocationSampler] = []
    yield made
    for s in made:
        s.stop()


def _row(strata: Strata, size: int) -> Stratum:
    exact, size_class = strata.key(size)
    return next(r for r in strata.rows if (r.exact, r.size_class) == (exact, size_class))


#: Run in a fresh interpreter: in the test process another thread (pytest-xdist's channel)
#: may allocate a block of the big class while the sampler runs, and the tallies are the
#: process's. The child prints what the assertions need.
KNOWN_PROGRAM = f"""
import json, sys
from profkit.heap import Allocation, AllocationSampler, build_profile
from profkit.heap.sampler import allocation_strata

def make_big(out):
    for i in range(len(out)):
        out[i] = bytes({BIG})

def make_small(out):
    for i in range(len(out)):
        out[i] = bytes({SMALL})

big, small = [None] * {N_BIG}, [None] * {N_SMALL}  # made before sampling: no list growth
s = AllocationSampler(64 * 1024)  # ~90 samples in the big class: none is ~e^-90
s.start()
make_big(big)
make_small(small)
events = s.drain()
s.stop()
events += s.drain()  # sampled between the drain and stop: the strata count these too
strata = allocation_strata()
profile = build_profile(events, strata=strata)
factors = strata.factors()
big_key = strata.key(sys.getsizeof(bytes({BIG})))
in_big = [e for e in events if isinstance(e, Allocation) and strata.key(e.size) == big_key]
rows = {{f"{{r.exact}} {{r.size_class}}": [r.allocations, r.bytes] for r in strata.rows}}
print(json.dumps({{
    "exact_bytes": strata.exact_bytes,
    "rows": rows,
    "total": strata.allocated_bytes,
    "big_class_weight": sum(e.weight * factors[big_key] for e in in_big),
    "big_class_sites": sorted({{e.stack[0][0].co_name for e in in_big}}),
    "by_function": {{k.rpartition(".")[2]: v for k, v in profile.by_function("alloc").items()}},
    "profile_total": profile.allocated_bytes,
    "profile_sum": sum(profile.allocated.values()),
}}))
"""


def _known_program() -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-c", KNOWN_PROGRAM], capture_output=True, text=True, timeout=180
    )
    assert out.returncode == 0, out.stderr
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def _tally(result: dict[str, Any], size: int) -> list[int]:
    key = f"{size >= result['exact_bytes']} {size.bit_length() - 1}"
    found: list[int] = result["rows"][key]
    return found


@needs_native
def test_stratum_tallies_are_the_exact_allocations_of_a_known_program() -> None:
    result = _known_program()
    assert result["exact_bytes"] == 64 * 1024
    big_size, small_size = sys.getsizeof(bytes(BIG)), sys.getsizeof(bytes(SMALL))
    assert _tally(result, big_size) == [N_BIG, N_BIG * big_size]
    allocations, size = _tally(result, small_size)
    assert allocations >= N_SMALL and size >= N_SMALL * small_size
    assert result["total"] == sum(b for _, b in result["rows"].values())


@needs_native
def test_every_allocation_is_its_own_sample_at_a_mean_of_one_byte(
    sampler: list[AllocationSampler],
) -> None:
    out = [None] * 500
    s = AllocationSampler(1)
    sampler.append(s)
    s.start()
    make_big(out)  # type: ignore[arg-type]
    events = s.drain()
    s.stop()
    events += s.drain()  # what was sampled between the drain and stop
    strata = allocation_strata()
    assert strata is not None and strata.rows
    for r in strata.rows:  # every allocation sampled, each with weight = its size
        assert (r.samples, r.weight) == (r.allocations, float(r.bytes)), r
    sampled = sum(e.size for e in events if isinstance(e, Allocation))
    assert sampled == strata.allocated_bytes
    assert strata.unattributed_bytes == 0


@needs_native
def test_a_size_class_only_one_function_allocates_in_is_its_bytes_exactly() -> None:
    result = _known_program()
    big_size = sys.getsizeof(bytes(BIG))
    assert _tally(result, big_size)[0] == N_BIG  # make_big's blocks are the class's only ones
    # whatever samples fell where, the class's samples are make_big's and add up to its bytes
    assert result["big_class_sites"] == ["make_big"]
    assert result["big_class_weight"] == pytest.approx(N_BIG * big_size, rel=1e-9)
    assert result["by_function"]["make_big"] >= N_BIG * big_size * (1 - 1e-9)
    # and the whole profile adds up to the hooks' exact total
    assert result["profile_total"] == pytest.approx(result["total"], rel=1e-9)
    assert result["profile_sum"] == pytest.approx(result["total"], rel=1e-9)


def test_a_class_without_samples_goes_to_the_unattributed_site() -> None:
    strata = Strata(
        1024,
        (
            Stratum(False, 5, 100, 4000, 2, 3000.0),  # scaled by 4/3
            Stratum(False, 9, 3, 2000, 0, 0.0),  # nobody to give it to
        ),
    )
    code = test_a_class_without_samples_goes_to_the_unattributed_site.__code__
    events = [
        Allocation(1, 40, 1500.0, 0, ((code, 1),)),
        Allocation(2, 40, 1500.0, 0, ((code, 1),)),
    ]
    profile = build_profile(events, name=lambda c, line: "f", strata=strata)
    assert profile.allocated == {("f",): pytest.approx(4000.0), (UNATTRIBUTED,): 2000.0}
    assert profile.allocated_bytes == pytest.approx(6000.0)
    assert profile.unattributed_bytes == 2000.0
    assert profile.peak_bytes == pytest.approx(4000.0)  # the unattributed are in no live view
    assert profile.leaked == {("f",): pytest.approx(4000.0)}


def test_strata_metadata_round_trips() -> None:
    strata = Strata(
        524288, (Stratum(False, 5, 100, 4000, 2, 3000.5), Stratum(True, 20, 1, 1 << 20, 1, 1e6))
    )
    again = Strata.from_metadata(json.loads(json.dumps(strata.as_metadata())))
    assert again == strata


PROGRAM = f"""
big, small = [None] * {N_BIG}, [None] * {N_SMALL}

def make_big():
    for i in range(len(big)):
        big[i] = bytes({BIG})

def make_small():
    for i in range(len(small)):
        small[i] = bytes({SMALL})

make_big()
make_small()
print("done")
"""


def _memory_run(cwd: Path, script: str) -> subprocess.CompletedProcess[str]:
    """``profkit run --mode memory`` of ``script`` at a 64 KiB mean, saved to m.json, with
    no PROFKIT_ setting of the test's environment."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROFKIT_")}
    return subprocess.run(
        [sys.executable, "-m", "profkit", "run", "--no-tree", "--mode", "memory",
         "--alloc-sample", "64KiB", "-o", "m.json", script],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=180,
    )  # fmt: skip


@needs_native
def test_memory_mode_saves_its_strata_and_is_exact_in_a_class_of_its_own(
    tmp_path: Path,
) -> None:
    from profkit.calltree.file import load

    (tmp_path / "two.py").write_text(PROGRAM)
    out = _memory_run(tmp_path, "two.py")
    assert out.returncode == 0, out.stderr
    assert out.stdout == "done\n"
    profile = load(str(tmp_path / "m.json"))
    meta = profile.metadata
    strata = Strata.from_metadata(meta["alloc_strata"])
    assert meta["alloc_strata"]["method"] == "post-stratified by size class"
    assert strata.exact_bytes == 64 * 1024
    assert meta["unattributed_bytes"] == strata.unattributed_bytes
    big_size = sys.getsizeof(bytes(BIG))
    row = _row(strata, big_size)
    assert row.bytes >= N_BIG * big_size and row.samples > 0
    # the saved samples' counts stay as sampled (the flat report's samples column)
    assert 0 < meta["alloc_samples"] <= sum(r.samples for r in strata.rows)
    self_bytes: dict[str, float] = {}
    for thread in profile.threads:
        for _, node in thread.root.walk():
            if node.frame >= 0:
                name = profile.frames[node.frame].name.rpartition(".")[2]
                self_bytes[name] = self_bytes.get(name, 0) + node.exclusive_ns
    # make_big holds its class's exact bytes when nothing else allocated in that class
    if row.allocations == N_BIG:
        assert self_bytes["make_big"] >= N_BIG * big_size - 1
    assert self_bytes.get(UNATTRIBUTED, 0) == meta["unattributed_bytes"]


FORKING = f"""
import gc, os, sys

def make_big():
    return [bytes({BIG}) for _ in range({N_BIG})]

before = make_big()
gc.collect()  # delivers the parent's samples so far: the child must not count them
pid = os.fork()
if pid == 0:
    kept = make_big()
    sys.exit(0)
os.waitpid(pid, 0)
print("done")
"""


@needs_native
@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_is_stratified_with_its_own_tallies(tmp_path: Path) -> None:
    (tmp_path / "fk.py").write_text(FORKING)
    out = _memory_run(tmp_path, "fk.py")
    assert out.returncode == 0, out.stderr
    assert out.stdout == "done\n"
    children = [p for p in tmp_path.glob("m.*.json")]
    assert len(children) == 1, out.stderr
    meta = json.loads(children[0].read_text())["metadata"]
    # the child's tallies restart at fork, as its profiler's count of delivered samples does
    assert meta["alloc_strata"] is not None
    strata = Strata.from_metadata(meta["alloc_strata"])
    assert _row(strata, sys.getsizeof(bytes(BIG))).bytes >= N_BIG * sys.getsizeof(bytes(BIG))
