"""Import rules around the runner (issue #10): profilers know nothing of who runs them.

``profilers/`` may import :mod:`profkit.api`, the call-tree model and the neutral wire
protocol (:mod:`profkit.wire`) only — not the CLI, the runner, the settings table, the
monitor, reports or the saved-file code. The runner never imports the CLI. Checked on the source (every ``import``, at any depth), not on what happens to be
loaded.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).parents[2] / "src" / "profkit"


def _imports(package: str) -> list[tuple[str, str]]:
    found = []
    for path in sorted((SRC / package).rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found += [(path.name, alias.name) for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found += [(path.name, f"{node.module}.{a.name}") for a in node.names]
    return found


def _violations(package: str, forbidden: tuple[str, ...], allowed: tuple[str, ...] = ()) -> list:
    out = []
    for where, name in _imports(package):
        if name.startswith(allowed):
            continue
        if any(name == f or name.startswith(f + ".") for f in forbidden):
            out.append((where, name))
    return out


@pytest.mark.parametrize(
    ("package", "forbidden", "allowed"),
    [
        (
            "profilers",
            (
                "profkit.cli",
                "profkit.runner",
                "profkit.settings",
                "profkit.report",
                "profkit.monitor",
                "profkit.calltree",
                "profkit.collect",
            ),
            # the model, and the one rows/stacks -> tree builder over it (issue 21 item 3)
            ("profkit.calltree.model", "profkit.calltree.building"),
        ),
        ("runner", ("profkit.cli",), ()),
        ("api", ("profkit.runner", "profkit.cli", "profkit.settings", "profkit.collect"), ()),
    ],
)
def test_import_rules(package: str, forbidden: tuple[str, ...], allowed: tuple[str, ...]) -> None:
    assert _violations(package, forbidden, allowed) == []
