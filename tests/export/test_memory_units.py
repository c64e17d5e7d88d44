"""A memory profile in formats whose only unit is time (issue 25, item 3).

pstats and Chrome traces know seconds and microseconds, nothing else: a memory profile's
bytes were written as nanoseconds, so 512 KiB read 0.001 s in pstats (anything smaller
0.000) and nothing said the widths were bytes. Now pstats carries one second a byte
(exact to the byte in its three decimals), the Chrome trace says its unit in
``otherData``, and every write of either says so on stderr.
"""

from __future__ import annotations

import json
import os
import pstats
import subprocess
import sys
from pathlib import Path

from profkit._record import replace
from profkit.calltree import file as profile_file
from profkit.export import chrome, registry
from profkit.export import pstats as pstats_export
from tests.calltree.strategies import sample_profile


def _memory_profile():  # type: ignore[no-untyped-def]
    return replace(sample_profile(), mode="memory")


def test_pstats_counts_one_second_a_byte(tmp_path: Path) -> None:
    profile = _memory_profile()
    path = tmp_path / "m.pstats"
    path.write_bytes(pstats_export.write(profile))
    stats = pstats.Stats(str(path)).stats  # type: ignore[attr-defined]
    totals = {k[2]: v for k, v in stats.items()}
    trace_path = tmp_path / "t.pstats"
    trace_path.write_bytes(pstats_export.write(sample_profile()))
    as_time = {k[2]: v for k, v in pstats.Stats(str(trace_path)).stats.items()}  # type: ignore[attr-defined]
    for name, (_cc, _nc, tt, ct, _callers) in totals.items():
        assert tt == as_time[name][2] * 1e9 and ct == as_time[name][3] * 1e9


def test_chrome_trace_names_its_unit() -> None:
    doc = json.loads(chrome.write(_memory_profile()))
    assert doc["otherData"]["unit"].startswith("bytes")
    assert "unit" not in json.loads(chrome.write(sample_profile()))["otherData"]


def test_the_note_is_said_for_memory_profiles_only() -> None:
    memory, timed = _memory_profile(), sample_profile()
    for name in ("pstats", "chrome"):
        fmt = registry.get(name)
        assert registry.bytes_note(fmt, memory)
        assert registry.bytes_note(fmt, timed) is None
    for name in ("speedscope", "pprof", "html", "collapsed"):
        assert registry.bytes_note(registry.get(name), memory) is None


def test_export_says_what_the_bytes_became(tmp_path: Path) -> None:
    src = tmp_path / "m.json"
    profile_file.save(_memory_profile(), str(src))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROFKIT_")}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "profkit",
            "export",
            "-F",
            "pstats",
            "-o",
            str(tmp_path / "m.pstats"),
            str(src),
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert "profkit: note: pstats has no unit but seconds" in done.stderr
