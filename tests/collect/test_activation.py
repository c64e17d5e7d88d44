"""Activation through the environment: any Python process, its children, unchanged output.

Like coverage's ``try_execfile`` test: the probe program runs with and without
``PROFKIT_ENABLE_PROFILING`` and must print the same stdout and stderr and exit the same.
The interpreters under test have profkit installed (``pip install -e .`` puts
``profkit_startup.pth`` in site-packages); where it is missing, a ``sitecustomize`` that
runs the same line stands in.
"""

from __future__ import annotations

import json
import os
import site
import subprocess
import sys
from pathlib import Path

import pytest

from profkit.collect.select import unavailable

ROOT = Path(__file__).resolve().parents[2]
PROBE = Path(__file__).with_name("programs") / "probe.py"
PTH = ROOT / "src" / "profkit" / "collect" / "profkit_startup.pth"
BACKENDS = [b for b in ("monitoring", "setprofile", "sampler") if unavailable(b) is None]


def _pth_installed() -> bool:
    dirs = [*site.getsitepackages(), site.getusersitepackages()]
    return any(Path(d, "profkit_startup.pth").exists() for d in dirs)


def run_probe(mode: str, tmp: Path, **env_extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROFKIT_")}
    paths = [str(ROOT)]
    if not _pth_installed():
        shim = tmp / "shim"
        shim.mkdir(exist_ok=True)
        (shim / "sitecustomize.py").write_text(PTH.read_text())
        paths.insert(0, str(shim))
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env.update(env_extra)
    return subprocess.run(
        [sys.executable, str(PROBE), mode],
        env=env,
        cwd=tmp,
        capture_output=True,
        text=True,
        timeout=120,
    )


def results(out: Path) -> list[dict[str, object]]:
    return [json.loads(p.read_text()) for p in sorted(out.glob("*.json"))]


@pytest.mark.parametrize("mode", ["ok", "error", "exit", "interrupt"])
def test_output_and_status_unchanged(mode: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    bare = run_probe(mode, tmp_path)
    profiled = run_probe(
        mode,
        tmp_path,
        PROFKIT_ENABLE_PROFILING="1",
        PROFKIT_PROFILER="tests.collect.profilers:FileRecorder",
        PROFKIT_TEST_OUT=str(out),
    )
    assert profiled.stdout == bare.stdout
    assert profiled.stderr == bare.stderr
    assert profiled.returncode == bare.returncode
    assert bare.returncode == {"ok": 0, "error": 1, "exit": 3, "interrupt": bare.returncode}[mode]
    (record,) = results(out)
    names = record["names"]
    assert isinstance(names, list)
    assert {"fib", "squares", "tick", "in_thread", "main"} <= set(names)
    assert record["threads"] == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_children_profiled(backend: str, tmp_path: Path) -> None:
    if sys.platform == "win32":
        pytest.skip("fork start method")
    out = tmp_path / "out"
    out.mkdir()
    bare = run_probe("children", tmp_path)
    profiled = run_probe(
        "children",
        tmp_path,
        PROFKIT_ENABLE_PROFILING="1",
        PROFKIT_PROFILER="tests.collect.profilers:FileRecorder",
        PROFKIT_BACKEND=backend,
        PROFKIT_TEST_OUT=str(out),
    )
    assert profiled.stdout == bare.stdout
    assert profiled.stderr == bare.stderr
    assert profiled.returncode == bare.returncode == 0
    records = results(out)
    assert len({r["pid"] for r in records}) == len(records) >= 5
    assert {r["backend"] for r in records} == {backend}
    if backend != "sampler":
        seen = {name for r in records for name in r["names"]}  # type: ignore[attr-defined]
        assert {"in_subprocess", "in_fork_child", "in_spawn_child", "in_forkserver_child"} <= seen


@pytest.mark.parametrize(
    ("profiler", "where"),
    [("RaisesInEnter", "function_enter"), ("RaisesInInitialize", "initialize")],
)
def test_failing_profiler_reported_once(profiler: str, where: str, tmp_path: Path) -> None:
    bare = run_probe("exit", tmp_path)
    profiled = run_probe(
        "exit",
        tmp_path,
        PROFKIT_ENABLE_PROFILING="1",
        PROFKIT_PROFILER=f"tests.collect.profilers:{profiler}",
    )
    assert profiled.stdout == bare.stdout
    assert profiled.returncode == bare.returncode == 3
    extra = profiled.stderr.replace(bare.stderr, "", 1)
    lines = extra.splitlines()
    assert len(lines) == 1, profiled.stderr
    assert lines[0].startswith(
        f"profkit: profiler tests.collect.profilers.{profiler} failed in {where}: "
    )
    assert lines[0].endswith("; detached")


def test_bad_profiler_setting(tmp_path: Path) -> None:
    profiled = run_probe(
        "ok", tmp_path, PROFKIT_ENABLE_PROFILING="1", PROFKIT_PROFILER="no_such_module:X"
    )
    assert profiled.returncode == 0
    assert profiled.stderr.count("profkit: cannot attach profiler 'no_such_module:X'") == 1


def test_disabled_values_do_nothing(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    for value in ("0", "", "no"):
        proc = run_probe(
            "ok",
            tmp_path,
            PROFKIT_ENABLE_PROFILING=value,
            PROFKIT_PROFILER="tests.collect.profilers:FileRecorder",
            PROFKIT_TEST_OUT=str(out),
        )
        assert proc.returncode == 0
    assert not results(out)
