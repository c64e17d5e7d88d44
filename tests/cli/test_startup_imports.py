"""The import budget of ``profkit run`` before the program's first line (issue #11).

Start-up is judged by what is imported, not by timings (``bench/startup_bench.py`` times
it against cProfile): the program itself prints ``sys.modules`` as its first line, under
each way of starting it — ``python -m profkit run``, the ``profkit`` console script, and
environment activation (how every child of a profiled program starts). Nothing that only
saving, reporting, exporting, other modes or other commands need may be loaded by then:
each would be paid again by every run, and a program that never imports ``json`` or
``dataclasses`` would find them already there.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

PROBE = "import sys\nprint(' '.join(sorted(sys.modules)))\n"

#: Never loaded before the program starts (whole packages: any submodule counts).
FORBIDDEN = (
    # other commands and what runs after the program: saving, trees, exports, reports
    "profkit.export",
    "profkit.report",
    "profkit.monitor",
    "profkit.formats",
    "profkit.present",
    "profkit.heap",
    "profkit.sampler",
    "profkit.calltree.stream_writer",
    "profkit.calltree.file",
    "profkit.calltree.document",
    "profkit.clr.engine",
    "profkit.cli.clr",
    "profkit.cli.report",
    "profkit.cli.export",
    # the .NET side: run asks only whether the target's name ends in .dll/.exe
    # (profkit.engine.contract.looks_like_assembly_name)
    "profkit.clr",
    # heavy or unneeded standard library and third-party modules; dataclasses (and the
    # inspect, ast, dis it loads) cost more than all of cProfile's start: profkit._record
    "dataclasses",
    "inspect",
    "ast",
    "dis",
    "importlib.metadata",
    "pkg_resources",
    "json",
    "zlib",
    "zipfile",
    "shutil",
    "difflib",
    "subprocess",
    "socket",
    "numpy",
    "textwrap",
    # argparse (with gettext and locale): profkit.cli.run.quick_args reads the usual
    # command line; argparse parses only what that leaves (help, errors, rarer forms)
    "argparse",
    "gettext",
    "locale",
    # typing (~12 M instructions with re) and re: run-path modules import typing's names
    # for type checkers only (TYPE_CHECKING = False; if TYPE_CHECKING: ...)
    "typing",
    "re",
    # signal.py builds three enums at import (~3 M instructions): the runner uses _signal;
    # enum itself (~8 M with building a flag class): profkit.api.EventMask is built without it
    "signal",
    "enum",
)
#: Only for the profiler of a 3.12+ interpreter: the sys.monitoring collector.
MONITORING = ("profkit.collect.monitoring", "profkit.collect.hot_monitoring")


def _loaded(cmd: list[str], cwd: Path, **variables: str) -> set[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROFKIT_")}
    env.update(variables)
    proc = subprocess.run(
        cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr
    return set(proc.stdout.split())


#: Loaded on purpose before the program: where the profile goes is decided before it runs
#: (issue 21's one Destination, from the format table), and neither imports an exporter.
DESTINATION = ("profkit.export", "profkit.export.destination", "profkit.export.registry")


def _too_early(loaded: set[str], allowed: tuple[str, ...] = ()) -> list[str]:
    forbidden = FORBIDDEN + (MONITORING if sys.version_info < (3, 12) else ())
    forbidden = tuple(f for f in forbidden if f not in allowed)
    return sorted(
        m
        for m in loaded
        if m not in DESTINATION and any(m == f or m.startswith(f + ".") for f in forbidden)
    )


def _launchers() -> list[list[str]]:
    found = [[sys.executable, "-m", "profkit"]]
    script = Path(sys.executable).parent / "profkit"
    if script.exists():
        found.append([str(script)])
    return found


@pytest.mark.parametrize("launcher", _launchers(), ids=lambda c: Path(c[-1]).name)
@pytest.mark.parametrize("mode", ["trace", "memory"])
def test_run_imports_nothing_for_later_before_the_program(
    launcher: list[str], mode: str, tmp_path: Path
) -> None:
    (tmp_path / "probe.py").write_text(PROBE)
    loaded = _loaded(
        [*launcher, "run", "--no-tree", "--mode", mode, "-o", "out.json", "probe.py"], tmp_path
    )
    assert "profkit.cli.run" in loaded  # it did run under profkit
    if launcher[0] != sys.executable:  # the console script: no runpy (python -m needs it)
        assert "runpy" not in loaded
    # memory mode's profiler is built on the allocation hooks of profkit.heap (records, not
    # dataclasses; tracemalloc only for its fallback)
    memory = ("profkit.heap",)
    allowed = memory if mode == "memory" else ()
    # the console script is profkit's own launcher/profkit, not pip's entry-point wrapper
    # (which imports re): it is held to the same rule
    assert _too_early(loaded, allowed) == []


def test_environment_activation_imports_nothing_for_later(tmp_path: Path) -> None:
    (tmp_path / "probe.py").write_text(PROBE)
    loaded = _loaded(
        [sys.executable, "probe.py"],
        tmp_path,
        PROFKIT_ENABLE_PROFILING="1",
        PROFKIT_PROFILER="profkit.profilers.elt:EltProfiler",
        PROFKIT_TREE="0",
        PROFKIT_OUTPUT="out.json",
    )
    assert "profkit.collect.startup" in loaded
    assert "argparse" not in loaded  # no command line at all on this path
    assert _too_early(loaded) == []


def test_profiling_off_imports_nothing_of_profkit(tmp_path: Path) -> None:
    """The ``.pth`` line runs in every process of the environment: off, it loads nothing."""
    (tmp_path / "probe.py").write_text(PROBE)
    loaded = _loaded([sys.executable, "probe.py"], tmp_path)
    assert sorted(m for m in loaded if m.startswith("profkit")) == []


#: What the program's own exit handler prints: every module loaded by then, the
#: end-of-run tree's included (profkit prints it before the interpreter's exit handlers).
PROBE_AT_EXIT = (
    "import atexit, sys\natexit.register(lambda: print(' '.join(sorted(sys.modules))))\n"
)


def test_the_end_of_run_tree_imports_no_dataclasses_nor_typing(tmp_path: Path) -> None:
    """Printing the tree is part of every ``profkit run``'s fixed cost: ``dataclasses``
    (with ``inspect``, ``ast``, ``dis``, ``tokenize``) cost more than a fifth of cProfile's
    whole start, and the report needs none of them (``profkit._record``); nor ``re`` (~7 M
    instructions: a duration pattern is compiled on first use) nor the flat report's
    modules (the memory notes under the tree live in ``profkit.report._fmt``)."""
    (tmp_path / "probe.py").write_text(PROBE_AT_EXIT)
    loaded = _loaded(
        [sys.executable, "-m", "profkit", "run", "-o", "out.json", "probe.py"], tmp_path
    )
    assert "profkit.report.text" in loaded  # the tree was printed before the handler ran
    heavy = {"dataclasses", "inspect", "ast", "dis", "tokenize", "typing", "argparse", "re"}
    heavy |= {"signal", "enum", "array", "profkit.report.flat", "profkit.report.stats"}  # (#26)
    assert sorted(loaded & heavy) == []


def _imported_in_the_whole_run(cmd: list[str], cwd: Path) -> set[str]:
    """Every module the process imported, the save at its end included (``-X importtime``
    logs each import on stderr, after the program's exit handlers too)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROFKIT_")}
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", *cmd],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    lines = (line.split("|") for line in proc.stderr.splitlines())
    return {parts[2].strip() for parts in lines if len(parts) == 3 and "import time" in parts[0]}


@pytest.mark.parametrize("output", ["out.json", "out.json.gz"])
def test_saving_an_empty_run_imports_no_json_nor_re(output: str, tmp_path: Path) -> None:
    """The save is part of every run's fixed cost: ``json`` imports ``re`` and compiles its
    patterns (~13 M instructions) to write a few hundred bytes (issue #26);
    the stream writer encodes through json's own C encoder (``_json``) instead."""
    (tmp_path / "empty.py").write_text("")
    cmd = ["-m", "profkit", "run", "--no-tree", "-o", output, "empty.py"]
    imported = _imported_in_the_whole_run(cmd, tmp_path)
    assert "profkit.calltree.stream_writer" in imported  # it did save
    assert (tmp_path / output).exists()
    assert sorted(imported & {"json", "json.encoder", "json.decoder", "re"}) == []
