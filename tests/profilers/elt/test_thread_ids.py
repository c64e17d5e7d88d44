"""Threads in saved profiles carry their OS thread id and their name (issue #11), taken
on the thread itself, and the exports use them: Chrome trace ``tid``, speedscope's
profile names, pprof's ``tid`` label. A real threaded program under ``profkit run``; the
program prints what ``threading`` says, the oracle. (A thread whose ``Thread`` object is
gone by the end and whose id was reused is named as at its first event.)"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from profkit.calltree.file import load
from profkit.export import registry
from profkit.profilers.elt import native
from tests.export.protobuf import fields

PROGRAM = textwrap.dedent(
    """
    import threading

    def spin(n):
        return sum(i * i for i in range(n))

    def worker(ready):
        threading.current_thread().name = "renamed-" + threading.current_thread().name
        spin(20000)
        print(threading.get_ident(), threading.get_native_id(), threading.current_thread().name)

    threads = []  # kept: a renamed thread's name at the end is read from its Thread

    def main():
        threads.extend(threading.Thread(target=worker, args=(i,), name=f"w{i}") for i in range(3))
        for t in threads:
            t.start()
            t.join()  # one after another: idents may be reused, native ids too
        spin(20000)
        print(threading.get_ident(), threading.get_native_id(), threading.current_thread().name)

    main()
    """
)

MODES = [
    pytest.param({"PROFKIT_NATIVE": "off"}, id="python"),
    pytest.param(
        {"PROFKIT_NATIVE": "on"},
        id="native",
        marks=pytest.mark.skipif(not native.available(), reason="the C recorder is not built"),
    ),
]


@pytest.mark.parametrize("env", MODES)
def test_saved_threads_carry_native_ids_and_names(tmp_path: Path, env: dict[str, str]) -> None:
    script = tmp_path / "prog.py"
    script.write_text(PROGRAM)
    out = tmp_path / "prof.json"
    proc = subprocess.run(
        [sys.executable, "-m", "profkit", "run", "--no-tree", "-o", str(out), str(script)],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    printed = [line.split(" ", 2) for line in proc.stdout.splitlines()]
    profile = load(out)
    saved = {t.native_id: t for t in profile.threads}
    for ident, native_id, name in printed:
        thread = saved[int(native_id)]
        assert (thread.thread_id, thread.name) == (int(ident), name)
    assert len(saved) == len(printed) == 4

    # Chrome trace: each thread's events under its OS thread id, named as it was named
    chrome = tmp_path / "prof.trace.json"
    registry.export(profile, "chrome", str(chrome))
    events = json.loads(chrome.read_text())["traceEvents"]
    thread_names = {e["tid"]: e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    for native_id, thread in saved.items():
        assert thread_names[native_id].startswith(thread.name)

    # speedscope: profile names say the OS thread id
    ss = tmp_path / "prof.speedscope.json"
    registry.export(profile, "speedscope", str(ss))
    names = [p["name"] for p in json.loads(ss.read_text())["profiles"]]
    assert {f"{t.name} (tid {n})" for n, t in saved.items()} <= set(names)

    # pprof: a numeric tid label on the samples of each thread
    pb = tmp_path / "prof.pb.gz"
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
