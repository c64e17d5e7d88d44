"""`profkit profdata merge --dask` (#16 item 4): on a real LocalCluster and on a scheduler
plus two workers started here on 127.0.0.1, the output is byte-identical to the serial
merge (and so to llvm-profdata's); bad inputs are quarantined with --failure-mode=warn.

Dask is the optional ``dask`` extra (scripts/test installs it with ``dev``); without it
these tests skip and the flag says how to get it.
"""

from __future__ import annotations

import builtins
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cli.test_profdata_merge import run

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "instrprof" / "clang22"

distributed = pytest.importorskip(
    "distributed", reason="dask.distributed is not installed (pip install 'profkit[dask]')"
)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """40 inputs: two raw files of one binary, another binary, text; two bad ones: a
    front-end profile among IR ones (kind mismatch) and a truncated raw file."""
    root = tmp_path_factory.mktemp("dask_inputs")
    sources = ["ir.profraw", "ir_alt.profraw", "cxx_ir.profraw", "ir.proftext", "fe_mcdc.profraw"]
    for i in range(40):
        name = sources[i % 4] if i != 17 else sources[4]
        shutil.copy(FIX / name, root / f"in{i:02d}.{name.rsplit('.', 1)[1]}")
    (root / "in20.profraw").write_bytes((FIX / "ir.profraw").read_bytes()[:300])  # corrupt
    return root


def _files(root: Path) -> list[str]:
    return sorted(str(p) for p in root.glob("in*"))


def _serial(root: Path, out: Path, *extra: str) -> bytes:
    rc, _, err = run(["profdata", "merge", "-j", "1", *extra, "-o", str(out), *_files(root)])
    assert rc == 0, err
    return out.read_bytes()


@pytest.mark.slow
def test_local_cluster_equals_serial_and_quarantines_bad_inputs(
    inputs: Path, tmp_path: Path
) -> None:
    warn = ("--failure-mode=warn", "--llvm-default")
    expected = _serial(inputs, tmp_path / "serial.profdata", *warn)
    bad = tmp_path / "bad.txt"
    out = tmp_path / "dask.profdata"
    rc, _, err = run(
        [
            *("profdata", "merge", "--dask", "local", "-j", "2", *warn),
            *("--bad-inputs", str(bad), "-o", str(out), *_files(inputs)),
        ]
    )
    assert rc == 0, err
    assert out.read_bytes() == expected
    quarantined = [str(inputs / "in17.profraw"), str(inputs / "in20.profraw")]
    assert bad.read_text().splitlines() == quarantined
    assert "in17.profraw" in err and "in20.profraw" in err  # named in warnings too
    # without --failure-mode=warn a bad input fails the merge and nothing is written
    out2 = tmp_path / "none.profdata"
    rc, _, err = run(["profdata", "merge", "--dask", "local", "-o", str(out2), *_files(inputs)])
    assert rc == 2 and not out2.exists()


@pytest.fixture(scope="module")
def scheduler(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A dask scheduler and two single-thread workers on 127.0.0.1, as separate processes."""
    root = tmp_path_factory.mktemp("dask_cluster")
    info = root / "scheduler.json"
    procs: list[subprocess.Popen[bytes]] = []
    common = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, "cwd": root}
    try:
        procs.append(
            subprocess.Popen(
                [
                    *(sys.executable, "-m", "distributed.cli.dask_scheduler"),
                    *("--host", "127.0.0.1", "--port", "0", "--no-dashboard"),
                    *("--scheduler-file", str(info)),
                ],
                **common,  # type: ignore[call-overload]
            )
        )
        deadline = time.monotonic() + 60
        while not info.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        if not info.exists():
            pytest.skip("the dask scheduler did not start within 60 s")
        time.sleep(0.2)
        address = json.loads(info.read_text())["address"]
        for _ in range(2):
            procs.append(
                subprocess.Popen(
                    [
                        *(sys.executable, "-m", "distributed.cli.dask_worker", address),
                        *("--nworkers", "1", "--nthreads", "1", "--no-dashboard"),
                        *("--host", "127.0.0.1"),
                    ],
                    **common,  # type: ignore[call-overload]
                )
            )
        client = distributed.Client(address, timeout="30s")
        try:
            client.wait_for_workers(2, timeout=60)
        finally:
            client.close()
        yield address
    finally:
        for proc in reversed(procs):
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.mark.slow
def test_scheduler_and_two_workers_equal_serial(
    scheduler: str, inputs: Path, tmp_path: Path
) -> None:
    warn = ("--failure-mode=warn",)
    expected = _serial(inputs, tmp_path / "serial.profdata", *warn)
    out = tmp_path / "dask.profdata"
    rc, _, err = run(
        ["profdata", "merge", "--dask", scheduler, *warn, "-o", str(out), *_files(inputs)]
    )
    assert rc == 0, err
    assert out.read_bytes() == expected
    assert "note: wrote indexed v12" in err  # the default version works on Dask too


@pytest.mark.slow
def test_small_batches_make_a_deep_tree(scheduler: str, inputs: Path) -> None:
    """Batches of 3 inputs: 14 leaves and 13 combinations, still the serial result."""
    from profkit.formats.instrprof.indexed_writer import build_indexed
    from profkit.formats.instrprof.merge.files import MergeInput, merge_files
    from profkit.formats.instrprof.merge.on_dask import merge_on_dask

    items = [MergeInput(p, 1 + i % 3) for i, p in enumerate(_files(inputs))]
    serial = merge_files(items, jobs=1)
    client = distributed.Client(scheduler, timeout="30s")
    try:
        done: list[int] = []
        ours = merge_on_dask(items, client, batch=3, progress=done.append)
    finally:
        client.close()
    assert build_indexed(ours.profile) == build_indexed(serial.profile)
    # (a kind mismatch names the first input of the other kind its leaf saw, as with -j)
    assert [f for f, _ in ours.failures] == [f for f, _ in serial.failures]
    assert ours.merged == serial.merged
    assert ours.input_versions == serial.input_versions
    assert done and done[-1] == len(items)


def test_without_dask_the_flag_says_how_to_get_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    real_import = builtins.__import__

    def no_dask(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "distributed" or name.startswith("distributed."):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_dask)
    out = tmp_path / "o.profdata"
    rc, _, err = run(
        ["profdata", "merge", "--dask", "local", "-o", str(out), str(FIX / "ir.profraw")]
    )
    assert rc == 2 and "pip install 'profkit[dask]'" in err
    assert not out.exists()


def test_bad_dask_address_is_a_usage_error(tmp_path: Path) -> None:
    rc, _, err = run(
        [
            "profdata",
            "merge",
            "--dask",
            "nonsense",
            "-o",
            str(tmp_path / "o"),
            str(FIX / "ir.profraw"),
        ]
    )
    assert rc == 2 and "--dask nonsense" in err
