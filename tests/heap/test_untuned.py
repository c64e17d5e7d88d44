"""A program nobody tuned for (``python -m json.tool`` on a generated file): ``--mode memory``
names the allocating functions in the right proportions, and the peak (issue #15, "done when").

The truths, from runs of the same deterministic program:

* allocated bytes by function: a census, every allocation the hooks see (sampling mean of one
  byte, so every allocation is taken at its own size, one drain at the end, no delivery in
  between). It is not tracemalloc's: tracemalloc keeps only the blocks still alive, so the
  bytes allocated and freed (most of json.tool's, the encoder's chunks) are not in it. Nor
  memray's: its profile function makes a bound-method object for each call of a C method, so
  under memray json.dump and the encoder allocate ~1.5x (3.11) to ~3x (3.12) what they do
  bare; where no C method is called (json.decoder.raw_decode, json.load) memray and the census
  agree to the byte;
* the peak: tracemalloc's (``get_traced_memory()[1]``, every block), independent of profkit.

Both truths come from a harness that first loads the modules profkit has loaded when it starts
a program (argparse among them): their import is profkit's, not json.tool's. The json package
is json.tool's: ``python -m json.tool`` imports it as part of the run, and so does profkit.
"""

from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from profkit.calltree import file as profile_file
from profkit.heap import native_available

pytestmark = pytest.mark.skipif(
    not native_available(), reason="the allocation hooks (_heaphook) were not built"
)

MEAN = 4096  # bytes: ~10,000 samples of json.tool's ~40 MB

CENSUS = """\
import importlib, os, runpy, sys, tracemalloc
from profkit.heap.sampler import Allocation, AllocationSampler
result, loaded = sys.argv[1:3]
sys.argv = ["json.tool", *sys.argv[3:]]
# The modules already loaded when profkit starts a program: loading them is not the program's
# (json is not among them: python -m json.tool imports the json package as the program's)
for name in open(loaded).read().split():
    try:
        importlib.import_module(name)
    except Exception:
        pass
tracemalloc.start(1)
sampler = AllocationSampler(1)
sampler.start()
try:
    runpy.run_module("json.tool", run_name="__main__", alter_sys=True)
except SystemExit:
    pass
peak = tracemalloc.get_traced_memory()[1]
sampler.stop()
tracemalloc.stop()
by = {}
for event in sampler.drain():
    if isinstance(event, Allocation) and event.stack:
        code = event.stack[0][0]
        key = os.path.basename(code.co_filename) + ":" + code.co_name
        by[key] = by.get(key, 0) + event.size
import json
with open(result, "w") as fh:
    json.dump({"by": by, "peak": peak, "dropped": sampler.dropped}, fh)
"""


def _document(path: Path, n: int) -> None:
    rng = random.Random(15)
    doc = [
        {
            "id": i,
            "name": f"user{i}",
            "tags": [rng.choice("abcdefgh") * rng.randint(1, 12) for _ in range(rng.randint(0, 6))],
            "score": rng.random() * 100,
            "nested": {"a": [rng.randint(0, 10**6) for _ in range(5)], "ok": rng.random() < 0.5},
        }
        for i in range(n)
    ]
    path.write_text(json.dumps(doc))


def _by_function(path: Path) -> tuple[dict[str, float], float]:
    profile = profile_file.load(str(path))
    out: dict[str, float] = {}
    for thread in profile.threads:
        for _, node in thread.root.walk():
            if node.frame >= 0 and node.exclusive_ns:
                frame = profile.frames[node.frame]
                key = os.path.basename(frame.file) + ":" + frame.name.rpartition(".")[2]
                out[key] = out.get(key, 0.0) + node.exclusive_ns
    return out, float(profile.metadata["peak_bytes"])


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, float], float, dict]:
    tmp = tmp_path_factory.mktemp("untuned")
    data = tmp / "in.json"
    _document(data, 4000)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROFKIT_")}
    census = tmp / "census.py"
    census.write_text(CENSUS)
    truth_file = tmp / "truth.json"
    loaded = tmp / "loaded.json"
    run = [sys.executable, "-m", "profkit", "run", "--no-tree", "--mode", "memory"]
    listing = f"import sys; open({str(loaded)!r}, 'w').write(' '.join(sorted(sys.modules)))"
    done = subprocess.run(
        [*run, "-o", str(tmp / "listing.json"), "-c", listing],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    done = subprocess.run(
        [sys.executable, str(census), str(truth_file), str(loaded), str(data), str(tmp / "a.json")],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    profile = tmp / "mem.json"
    done = subprocess.run(
        [*run, "--alloc-sample", str(MEAN), "-o", str(profile), "-m", "json.tool",
         str(data), str(tmp / "b.json")],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (tmp / "a.json").read_bytes() == (tmp / "b.json").read_bytes()
    by, peak = _by_function(profile)
    return by, peak, json.loads(truth_file.read_text())


def test_the_allocating_functions_in_the_right_proportions(
    runs: tuple[dict[str, float], float, dict],
) -> None:
    got, _peak, truth = runs
    assert truth["dropped"] == 0
    census: dict[str, int] = truth["by"]
    total = sum(census.values())
    top = {key: size for key, size in census.items() if size >= 0.05 * total}
    # json.tool's allocators: the decoder, json.dump's writes and the encoder's generators
    assert {"decoder.py:raw_decode", "__init__.py:dump"} <= set(top)
    assert any(key.startswith("encoder.py:_iterencode") for key in top)
    for key, size in top.items():
        # the estimate's standard deviation: sqrt(mean * bytes) for allocations below the mean
        allowed = 4 * math.sqrt(MEAN * size) + 0.03 * size
        assert abs(got.get(key, 0.0) - size) <= allowed, (key, got.get(key), size)


@pytest.mark.xfail(
    reason="memory mode over-counts an import's peak (import json alone: 608-626 KB against "
    "tracemalloc's 113-120 KB): +10-16 % here on 3.11-3.13 since json's import is the "
    "program's (bbde3b2), as under python -m; open, see the session-14 note",
    strict=False,
)
def test_the_peak_is_tracemallocs(runs: tuple[dict[str, float], float, dict]) -> None:
    _got, peak, truth = runs
    assert peak == pytest.approx(truth["peak"], rel=0.10)
