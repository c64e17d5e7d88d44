"""pprof output decoded by a third-party decoder: DataDog's pure-JS ``pprof-format``.

Runs only when ``node`` is on PATH and the npm package resolves (``npm install
pprof-format`` somewhere and point ``PROFKIT_NODE_MODULES`` at that ``node_modules``);
skipped otherwise. ``go tool pprof`` is not used: Go is not on the test machines.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from profkit.export import pprof
from tests.calltree.strategies import sample_profile

_SCRIPT = """
const { gunzipSync } = require('node:zlib');
const { readFileSync } = require('node:fs');
const { Profile } = require(process.argv[2]);
const p = Profile.decode(gunzipSync(readFileSync(process.argv[3])));
const s = (i) => p.stringTable.strings[Number(i)];
const fn = new Map(p.function.map(f => [Number(f.id), s(f.name)]));
const loc = new Map(p.location.map(l => [Number(l.id), fn.get(Number(l.line[0].functionId))]));
console.log(JSON.stringify({
  types: p.sampleType.map(v => [s(v.type), s(v.unit)]),
  samples: p.sample.map(x => [x.locationId.map(i => loc.get(Number(i))).reverse().join(';'),
                              x.value.map(Number), s(x.label[0].str)]),
}));
"""


def _decoder() -> str | None:
    node = shutil.which("node")
    if node is None:
        return None
    env = dict(os.environ)
    if "PROFKIT_NODE_MODULES" in env:
        env["NODE_PATH"] = env["PROFKIT_NODE_MODULES"]
    done = subprocess.run(
        [node, "-p", "require.resolve('pprof-format')"],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
        check=False,
    )
    return done.stdout.strip() if done.returncode == 0 else None


def test_pprof_format_decodes_our_output(tmp_path: Path) -> None:
    module = _decoder()
    if module is None:
        pytest.skip("node with the pprof-format npm package is not available")
    path = tmp_path / "p.pb.gz"
    path.write_bytes(pprof.write(sample_profile()))
    script = tmp_path / "decode.cjs"
    script.write_text(_SCRIPT)
    done = subprocess.run(
        ["node", str(script), module, str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    out = json.loads(done.stdout)
    assert out["types"] == [["calls", "count"], ["time", "nanoseconds"]]
    samples = {(stack, thread): tuple(values) for stack, values, thread in out["samples"]}
    assert samples[("myapp.main;myapp.core.work;json.dumps", "MainThread")] == (1, 4_000_000)
    assert samples[("myapp.core.helper", "worker")] == (1, 2_000_000)
