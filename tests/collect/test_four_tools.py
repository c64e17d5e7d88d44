"""A program using four ``sys.monitoring`` tools runs under profkit as without it
(issue 22, item 14).

profkit held three of the six tool ids (the collector's two, the elt profiler's C-call
tool): a program claiming 2, 3, 4 and 5 got its first three (profkit's moved to free
ids) and died of ``ValueError: tool 5 is already in use`` at the fourth. With no id
left to move to, the C-call tool is now given up to the program.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from profkit.calltree import file as profile_file

pytestmark = pytest.mark.skipif(not hasattr(sys, "monitoring"), reason="sys.monitoring needs 3.12+")

FOUR_TOOLS = """\
import sys
mon = sys.monitoring
starts = []
def seen(code, offset):
    starts.append(code.co_name)
for tool in (2, 3, 4, 5):
    mon.use_tool_id(tool, f"tool{tool}")
    mon.register_callback(tool, mon.events.PY_START, seen)
    mon.set_events(tool, mon.events.PY_START)
def work(n):
    return sorted(range(n))[-1]
results = [work(100) for _ in range(3)]
for tool in (2, 3, 4, 5):
    mon.set_events(tool, 0)
    mon.free_tool_id(tool)
print(results, [mon.get_tool(t) for t in (2, 3, 4, 5)], starts.count("work"))
"""


def _run(cmd: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROFKIT_")}
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("mode", ["trace", "memory"])
def test_a_program_with_four_tools_runs_as_bare(mode: str, tmp_path: Path) -> None:
    (tmp_path / "tools.py").write_text(FOUR_TOOLS)
    bare = _run([sys.executable, "tools.py"], tmp_path)
    assert bare.returncode == 0, bare.stderr
    assert bare.stdout == "[99, 99, 99] [None, None, None, None] 12\n"
    run = ["-m", "profkit", "run", "--mode", mode, "--no-tree", "-o", "out.json", "tools.py"]
    profiled = _run([sys.executable, *run], tmp_path)
    assert (profiled.returncode, profiled.stdout) == (0, bare.stdout), profiled.stderr
    if mode == "trace":  # the program's own calls are still recorded
        profile = profile_file.load(tmp_path / "out.json")
        work = {i for i, f in enumerate(profile.frames) if f.name == "__main__.work"}
        calls = sum(
            node.calls
            for thread in profile.threads
            for _, node in thread.root.walk()
            if node.frame in work
        )
        assert calls == 3
        assert "C functions are nodes only until then" in profile.metadata["c_calls_stopped"]
