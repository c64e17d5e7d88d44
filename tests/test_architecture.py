"""The import rules of docs/architecture.md, checked on the source.

Each package may import only the packages its row allows (the standard library and
third-party libraries are not checked here). A failure names the module, the import and the
rule: change the code, or change the rule in docs/architecture.md and here, saying why.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "profkit"

#: top-level unit (package or module of profkit) -> the profkit units it may import
SHARED = {"errors", "_text"}
ALLOWED: dict[str, set[str]] = {
    "api": {"errors"},
    "collect": {"api", "settings", "errors", "_text", "heap", "_toolids"},
    # api: frames named by the one naming rule (api.names.module_of)
    "heap": {"api", "errors", "calltree"},
    # _toolids: the elt C-call tool moves off a claimed sys.monitoring id as the collector's do
    # _streamfile: the --stream file the runner opened and checked, handed to the text sink
    "profilers": {"api", "calltree", "errors", "wire", "_toolids", "_streamfile"},
    # the contract between the runner and its engines, below both (no cycle)
    # export: a Job carries the run's Destination (export.destination)
    "engine": {"calltree", "export", "settings", "errors"},
    # runner loads engines and profilers by name from its table (importlib), not imports
    "runner": {
        "api",
        "calltree",
        "collect",
        "engine",
        "errors",
        "export",
        "report",
        "settings",
        "_atomic",
        "_output",
        "_streamfile",
        "_text",
    },
    # sampler and clr are engines: they import engine (and export for the Destination),
    # never runner, which loads them by name (no package cycle)
    "sampler": {"api", "calltree", "engine", "export", "settings", "errors", "_text"},
    "clr": {
        "calltree",
        "engine",
        "export",
        "formats",
        "settings",
        "errors",
        "wire",
        "_text",
        "_lazy",
    },
    # the .NET sampler: the CLR package's host/assembly/target, the nettrace reader, the engine contract
    "dotnet": {"calltree", "clr", "engine", "formats", "errors", "_text"},
    "calltree": {"errors", "_atomic", "_inputs"},
    "report": {"api", "calltree", "errors", "_text"},
    "export": {"calltree", "report", "errors", "_atomic", "_output"},
    # settings: its one PROFKIT_* variable (PROFKIT_NO_RECVMMSG) read through the table
    "monitor": {"wire", "report", "settings", "errors", "_text"},
    "wire": {"errors"},
    "formats": {"errors", "_atomic", "_inputs", "_lazy"},
    "present": {"formats", "errors", "_text", "_lazy"},
    "settings": {"api", "errors"},
    "demo": set(),
    "_inputs": {"errors"},
    "_output": {"errors"},
    "_atomic": {"errors", "_output"},
    "_text": set(),
    "_lazy": set(),
    "_toolids": set(),
    "_streamfile": {"_atomic"},
    "_record": {"_record_inits"},
    "_record_inits": set(),
    "errors": set(),
}
#: modules allowed one more import than their package, each with its reason
EXCEPTIONS: dict[str, set[str]] = {
    # the environment activation of profkit's own profilers is the runner's (it saves)
    "collect/startup.py": {"runner"},
    # the output formats `-o FILE.EXT` may name come from the export table
    "settings/parse.py": {"export"},
}
#: what every module may import: the package root (``__version__``) and the record classes
#: that stand in for dataclasses where start-up time counts (a language-level helper)
EVERYWHERE = {"__version__", "_record"}


def _unit(path: Path) -> str:
    rel = path.relative_to(SRC).parts
    return rel[0] if len(rel) > 1 else rel[0].removesuffix(".py")


def _imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
            if node.module == "profkit":
                found += [(node.lineno, f"profkit.{alias.name}") for alias in node.names]
    return [(line, name) for line, name in found if name.startswith("profkit.")]


MODULES = sorted(p for p in SRC.rglob("*.py") if _unit(p) not in {"cli", "__main__", "__init__"})


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(SRC)))
def test_imports_follow_the_architecture(path: Path) -> None:
    unit = _unit(path)
    assert unit in ALLOWED, f"{unit} has no row in docs/architecture.md's table"
    allowed = ALLOWED[unit] | {unit} | EVERYWHERE
    allowed |= EXCEPTIONS.get(str(path.relative_to(SRC)), set())
    bad = [
        f"{path.relative_to(SRC)}:{line} imports {name}"
        for line, name in _imports(path)
        if name.split(".")[1] not in allowed
    ]
    assert not bad, "\n".join(bad)


def test_formats_know_nothing_of_collectors_or_presentation() -> None:
    forbidden = {"collect", "profilers", "runner", "cli", "present", "report", "export", "heap"}
    bad = [
        f"{p.relative_to(SRC)}:{line} imports {name}"
        for p in SRC.joinpath("formats").rglob("*.py")
        for line, name in _imports(p)
        if name.split(".")[1] in forbidden
    ]
    assert not bad, "\n".join(bad)
