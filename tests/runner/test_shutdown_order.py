"""The program's end runs as under python: its exit handlers see its own ``__main__``,
``sys.argv`` and module globals (issue 22, item 12).

python keeps ``__main__`` in ``sys.modules`` until finalization, after the ``atexit``
handlers, so a module global's ``weakref.finalize`` callback runs after them. ``profkit
heap run`` put profkit's own ``__main__`` back as the program ended: the global died first
and the callback printed before the handler. The oracle is the bare run's stdout.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

PROGRAM = """\
import atexit, sys, weakref
class Thing:
    pass
thing = Thing()  # held by the module alone: no cycle keeps it
weakref.finalize(thing, print, "finalize callback")
def report():
    main = sys.modules["__main__"]
    print("atexit handler", sys.argv[1:], hasattr(main, "thing"), hasattr(main, "__file__"))
atexit.register(report)
print("main done")
"""

COMMANDS = {
    "heap run": ["heap", "run"],
    "run": ["run", "--no-tree", "-o", "out.json"],
    "run memory": ["run", "--mode", "memory", "--no-tree", "-o", "out.json"],
}


def _run(cmd: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROFKIT_")}
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("command", list(COMMANDS))
def test_exit_handlers_run_before_the_globals_die(command: str, tmp_path: Path) -> None:
    (tmp_path / "ending.py").write_text(PROGRAM)
    bare = _run([sys.executable, "ending.py", "arg"], tmp_path)
    assert bare.stdout == ("main done\natexit handler ['arg'] True False\nfinalize callback\n"), (
        bare.stderr
    )
    profiled = _run(
        [sys.executable, "-m", "profkit", *COMMANDS[command], "ending.py", "arg"], tmp_path
    )
    assert (profiled.returncode, profiled.stdout) == (0, bare.stdout), profiled.stderr
