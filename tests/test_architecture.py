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


#: package cycles there are, each with its reason (a new one fails the test below)
KNOWN_CYCLES: list[set[str]] = [
    # environment activation: the start-up hook (collect/startup.py) hands a child's
    # profile to the runner's saver, and the runner attaches through collect
    {"collect", "runner"},
]


def _package_graph() -> dict[str, set[str]]:
    """Unit -> units it imports, plus what the runner loads by name from its table
    (engines and profilers: an import all the same, made through importlib)."""
    from profkit.runner.choice import CHOICES

    graph: dict[str, set[str]] = {}
    for path in MODULES:
        unit = _unit(path)
        for _, name in _imports(path):
            other = name.split(".")[1]
            if other not in {unit, *EVERYWHERE}:
                graph.setdefault(unit, set()).add(other)
    for row in CHOICES:
        for loaded in (row.engine, row.profiler):
            if loaded:
                graph.setdefault("runner", set()).add(loaded.split(".")[1].split(":")[0])
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one unit (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[set[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(component)
    return found


def test_no_package_cycle_but_the_known_ones() -> None:
    """Engines import the contract below the runner (profkit.engine), never the runner that
    loads them: an engine importing runner would close a cycle through the table's names."""
    cycles = _cycles(_package_graph())
    assert all(c in KNOWN_CYCLES for c in cycles), cycles
    assert all(c in cycles for c in KNOWN_CYCLES), f"stale: {KNOWN_CYCLES} vs {cycles}"


def test_the_cycle_check_sees_an_engine_importing_the_runner() -> None:
    graph = _package_graph()
    graph.setdefault("sampler", set()).add("runner")
    assert {"runner", "sampler", "collect"} <= next(c for c in _cycles(graph) if "sampler" in c)
