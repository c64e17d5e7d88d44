"""The import rules of docs/architecture.md, checked on the source.

Each package may import only the packages its row allows (the standard library and
third-party libraries are not checked here). A failure names the module, the import and the
rule: change the code, or change the rule in docs/architecture.md and here, saying why.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "profkit"
DOC = SRC.parents[1] / "docs" / "architecture.md"

#: what every module may import (docs/architecture.md says so above its table): the one
#: error root, the package root (``__version__``) and the record classes that stand in for
#: dataclasses where start-up time counts (a language-level helper)
EVERYWHERE = {"errors", "__version__", "_record"}


def _outside_parentheses(text: str) -> str:
    """``text`` without its parenthesised reasons (which may nest and name units)."""
    depth, kept = 0, []
    for char in text:
        depth += char == "("
        if depth == 0:
            kept.append(char)
        depth -= char == ")" and depth > 0
    return "".join(kept)


def _documented() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """docs/architecture.md's table: unit -> the units it may import, and file -> the one
    more it may ("`X` only from `file.py`"). The table is the rule; this test reads it, so
    the two cannot disagree. ``cli/`` (anything) is not checked."""
    allowed: dict[str, set[str]] = {}
    exceptions: dict[str, set[str]] = {}
    for line in DOC.read_text(encoding="utf-8").splitlines():
        cells = line.split(" | ")
        if not line.startswith("| `") or len(cells) != 3:
            continue
        units = [u.rstrip("/").removesuffix(".py") for u in re.findall(r"`([\w/.]+)`", cells[0])]
        column = _outside_parentheses(cells[2].rstrip(" |"))
        if units == ["cli"]:
            continue
        plain, *only = column.split(";")
        for unit in units:
            allowed[unit] = set(re.findall(r"`(\w+)`", plain))
            for rule in only:
                found = re.fullmatch(r"\s*`(\w+)` only from `([\w/.]+)`\s*", rule)
                assert found, f"docs/architecture.md, {unit}: cannot read {rule!r}"
                exceptions.setdefault(f"{unit}/{found[2]}", set()).add(found[1])
    return allowed, exceptions


#: top-level unit (package or module of profkit) -> the profkit units it may import, and
#: the modules allowed one more import than their package (each with its reason in the doc)
ALLOWED, EXCEPTIONS = _documented()


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


def test_every_allowance_is_used() -> None:
    """An allowance nobody uses is stale: the table must say what the code does, so a
    package that stops importing another loses the right to (narrowed in the doc)."""
    used: dict[str, set[str]] = {}
    for path in MODULES:
        key = str(path.relative_to(SRC))
        names = {name.split(".")[1] for _, name in _imports(path)}
        used.setdefault(_unit(path), set()).update(names)
        used[key] = names
    stale = [
        f"{unit} may import {sorted(a - used.get(unit, set()))}" for unit, a in ALLOWED.items()
    ]
    stale += [f"{f} may import {sorted(a - used.get(f, set()))}" for f, a in EXCEPTIONS.items()]
    stale = [s for s in stale if not s.endswith("[]")]
    assert not stale, "unused allowances in docs/architecture.md:\n" + "\n".join(stale)


def test_the_table_covers_every_unit_and_reads_its_rules() -> None:
    units = {_unit(p) for p in MODULES}
    assert units <= set(ALLOWED), f"no row in docs/architecture.md: {units - set(ALLOWED)}"
    assert set(ALLOWED) <= units, f"rows for nothing: {set(ALLOWED) - units}"
    documented = {"collect/startup.py": {"runner"}, "settings/parse.py": {"export"}}
    assert documented == EXCEPTIONS
    assert ALLOWED["runner"] >= {"collect", "engine", "export"} and not ALLOWED["wire"]


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
