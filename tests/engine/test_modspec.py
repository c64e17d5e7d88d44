"""engine/modspec: python -m's module found without running its packages."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from profkit.engine import modspec


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """pkga (its __init__ leaves a mark) > sub (a package) > leaf.py, and pkga/tool.py."""
    sub = tmp_path / "pkga" / "sub"
    sub.mkdir(parents=True)
    (tmp_path / "pkga" / "__init__.py").write_text("import sys\nsys.modules['MARK_A'] = sys\n")
    (tmp_path / "pkga" / "tool.py").write_text("")
    (sub / "__init__.py").write_text("import sys\nsys.modules['MARK_SUB'] = sys\n")
    (sub / "leaf.py").write_text("")
    (sub / "__main__.py").write_text("")
    (tmp_path / "plain.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    yield tmp_path
    for name in [n for n in sys.modules if n.split(".")[0] in {"pkga", "plain"} or "MARK" in n]:
        del sys.modules[name]


@pytest.mark.parametrize(
    ("name", "parent", "origin"),
    [
        ("plain", None, "plain.py"),
        ("pkga.tool", "pkga", "pkga/tool.py"),
        ("pkga.sub.leaf", "pkga.sub", "pkga/sub/leaf.py"),
        ("pkga.sub.__main__", "pkga.sub", "pkga/sub/__main__.py"),
    ],
)
def test_finds_what_find_spec_finds_and_runs_nothing(
    tree: Path, name: str, parent: str | None, origin: str
) -> None:
    spec = modspec.spec_without_running(name)
    assert spec is not None and spec.origin == str(tree / origin)
    assert spec.name == name
    assert "MARK_A" not in sys.modules and "MARK_SUB" not in sys.modules  # nothing ran
    assert modspec.pending_package(spec) == parent
    found = spec.origin.rpartition("/")[0]
    assert modspec.found_in(spec) == found
    expected = importlib.util.find_spec(name)  # the importing search: runs the packages
    assert expected is not None and expected.origin == spec.origin
    if parent is not None:
        assert found in sys.modules[parent].__path__  # the runner's after-import test
        assert modspec.pending_package(spec) is None  # now imported


def test_a_package_gives_its_own_directory_s_parent(tree: Path) -> None:
    spec = modspec.spec_without_running("pkga.sub")
    assert spec is not None and spec.submodule_search_locations is not None
    assert modspec.found_in(spec) == str(tree / "pkga")


@pytest.mark.parametrize("name", ["nosuch_top_xyz", "pkga.nosuch", "plain.x", "pkga..x", ".x"])
def test_what_it_cannot_find_is_none(tree: Path, name: str) -> None:
    assert modspec.spec_without_running(name) is None
    assert "MARK_A" not in sys.modules


def test_an_imported_package_s_own_path_is_followed(tree: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "extra.py").write_text("")
    import pkga  # type: ignore[import-not-found]

    pkga.__path__.append(str(elsewhere))
    spec = modspec.spec_without_running("pkga.extra")
    assert spec is not None and spec.origin == str(elsewhere / "extra.py")
