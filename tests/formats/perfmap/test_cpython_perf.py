"""Real CPython 3.12/3.13 ``-X perf`` maps, generated here and read back.

Each test runs a tiny script under a pyenv interpreter with ``-X perf``, which makes
CPython write ``/tmp/perf-<pid>.map`` (spec §2.6). We then check the byte-exact round
trip, that our functions appear, and that every byte of their trampolines resolves.
Skipped when the interpreter is absent or was built without perf trampolines.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from profkit.formats.perfmap._lines import CPYTHON_STYLE
from profkit.formats.perfmap.perfpid import read_perf_map, write_perf_map
from profkit.formats.perfmap.symbolizer import Symbolizer

INTERPRETERS = {
    "3.12": "/root/.pyenv/versions/3.12.1/bin/python",
    "3.13": "/root/.pyenv/versions/3.13.0/bin/python",
}

SCRIPT = """\
import os

def alpha_profkit(n):
    return sum(beta_profkit(i) for i in range(n))

def beta_profkit(i):
    return i * 2

class Shape:
    def area_profkit(self):
        return alpha_profkit(3)

Shape().area_profkit()
print(os.getpid())
"""


def _supports_perf(python: str) -> bool:
    probe = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_config_var('PY_HAVE_PERF_TRAMPOLINE'))"],
        capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    return probe.returncode == 0 and probe.stdout.strip() == "1"


@pytest.mark.parametrize("version", sorted(INTERPRETERS))
def test_cpython_perf_map(version: str, tmp_path: Path) -> None:
    python = INTERPRETERS[version]
    if not os.access(python, os.X_OK):
        pytest.skip(f"CPython {version} not installed at {python}")
    if not _supports_perf(python):
        pytest.skip(f"CPython {version} here has no perf trampoline support")
    script = tmp_path / "workload.py"
    script.write_text(SCRIPT)
    proc = subprocess.run(
        [python, "-X", "perf", str(script)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    map_path = Path(f"/tmp/perf-{int(proc.stdout.strip())}.map")
    try:
        data = map_path.read_bytes()
    finally:
        map_path.unlink(missing_ok=True)

    m = read_perf_map(data, path=str(map_path))
    assert write_perf_map(m) == data  # byte-exact round trip of a real writer's output
    assert m.style == CPYTHON_STYLE
    assert m.writer_guess() == "CPython -X perf"
    ours = {n: (a, s) for a, s, n in m.entries() if n.endswith(f":{script}") and "profkit" in n}
    assert set(ours) == {
        f"py::alpha_profkit:{script}",
        f"py::alpha_profkit.<locals>.<genexpr>:{script}",
        f"py::beta_profkit:{script}",
        f"py::Shape.area_profkit:{script}",
    }
    sym = Symbolizer()
    sym.add_perf_map(m, str(map_path))
    for name, (start, size) in ours.items():
        assert size > 0
        for addr in (start, start + size // 2, start + size - 1):
            hit = sym.lookup(addr)
            assert hit is not None and (hit.name, hit.offset) == (name, addr - start)
        batch = sym.symbols(sym.lookup_many([start, start + size - 1]))
        assert [s.name if s else None for s in batch] == [name, name]
