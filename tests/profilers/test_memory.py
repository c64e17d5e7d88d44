"""Memory mode records each thread's OS thread id (``native_id``) as trace and sample modes
do, so exports show it: Chrome trace ``tid``, pprof's ``tid`` label. A real threaded
program under ``profkit run --mode memory``; the program prints what ``threading`` says,
the oracle. One thread has ended long before the profile is built (its id comes from the
collector's record), one is alive."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from profkit.calltree.file import load
from profkit.export import registry
from tests.export.protobuf import fields

PROGRAM = textwrap.dedent(
    """
    import threading
    keep = []

    def allocate():
        for _ in range(4):
            keep.append(bytearray(1024 * 1024))  # far above the sampling mean: always seen
        t = threading.current_thread()
        print(threading.get_ident(), threading.get_native_id(), t.name, flush=True)

    worker = threading.Thread(target=allocate, name="keeper")
    worker.start()
    worker.join()
    allocate()
    """
)


def test_memory_profiles_carry_native_thread_ids_into_exports(tmp_path: Path) -> None:
    (tmp_path / "prog.py").write_text(PROGRAM)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROFKIT_")}
    cmd = [sys.executable, "-m", "profkit", "run", "--no-tree", "--mode", "memory"]
    proc = subprocess.run(
        [*cmd, "--alloc-sample", "64KiB", "-o", "mem.json", "prog.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    printed = [line.split(" ", 2) for line in proc.stdout.splitlines()]
    assert [name for _, _, name in printed] == ["keeper", "MainThread"]
    profile = load(tmp_path / "mem.json")
    saved = {t.native_id: t for t in profile.threads}
    for ident, native_id, name in printed:
        thread = saved[int(native_id)]
        assert (thread.thread_id, thread.name) == (int(ident), name)
    assert len(saved) == 2

    chrome = tmp_path / "mem.trace.json"
    registry.export(profile, "chrome", str(chrome))
    events = json.loads(chrome.read_text())["traceEvents"]
    named = {e["tid"]: e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    for native_id, thread in saved.items():
        assert named[native_id].startswith(thread.name)

    pb = tmp_path / "mem.pb.gz"
    registry.export(profile, "pprof", str(pb))
    message = fields(gzip.decompress(pb.read_bytes()))
    strings = [b.decode() for b in message[6] if isinstance(b, bytes)]
    tids = set()
    for sample in message[2]:
        assert isinstance(sample, bytes)
        for label in fields(sample)[3]:
            assert isinstance(label, bytes)
            lf = fields(label)
            if strings[int(lf[1][0])] == "tid":  # type: ignore[arg-type]
                tids.add(lf[3][0])
    assert tids == set(saved)
