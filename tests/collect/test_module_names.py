"""Module names of functions: a script that replaced ``__main__`` is named ``__main__``."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

from profkit.collect import idtables


def test_replaced_main_module_is_found_without_a_length_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = tmp_path / "aio_script.py"
    script.write_text("x = 1\n")
    idtables.module_of(str(tmp_path / "warm-up.py"))  # the cache has scanned sys.modules
    fake_main = types.ModuleType("__main__")
    fake_main.__file__ = str(script)
    monkeypatch.setitem(sys.modules, "__main__", fake_main)  # same length as before
    assert idtables.module_of(str(script)) == "__main__"


def test_unknown_file_falls_back_to_its_stem(tmp_path: Path) -> None:
    assert idtables.module_of(str(tmp_path / "never_imported.py")) == "never_imported"


class _CountingModule:
    """A ``sys.modules`` entry that counts how often its ``__file__`` is read."""

    reads = 0

    def __init__(self, path: str) -> None:
        self._path = path

    @property
    def __file__(self) -> str:
        _CountingModule.reads += 1
        return self._path


def test_a_miss_after_imports_reads_only_the_new_modules(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """sympy's 500 imports each rescanned all of sys.modules (~1 s charged to exec)."""
    for i in range(50):
        monkeypatch.setitem(sys.modules, f"pk_old_{i}", _CountingModule(str(tmp_path / f"o{i}.py")))
    idtables.module_of(str(tmp_path / "warm-up.py"))
    _CountingModule.reads = 0
    new = tmp_path / "pk_new.py"
    monkeypatch.setitem(sys.modules, "pk_new", _CountingModule(str(new)))
    assert idtables.module_of(str(new)) == "pk_new"
    assert _CountingModule.reads == 1


def test_a_module_removed_and_put_back_does_not_hide_newer_imports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = types.ModuleType("pk_moved")
    old.__file__ = str(tmp_path / "pk_moved.py")
    monkeypatch.setitem(sys.modules, "pk_moved", old)
    idtables.module_of(str(tmp_path / "warm-up.py"))
    for name in ("pk_between_a", "pk_between_b"):
        mod = types.ModuleType(name)
        mod.__file__ = str(tmp_path / f"{name}.py")
        monkeypatch.setitem(sys.modules, name, mod)
    del sys.modules["pk_moved"]
    sys.modules["pk_moved"] = old  # now the newest entry, and already recorded
    assert idtables.module_of(str(tmp_path / "pk_between_a.py")) == "pk_between_a"
    assert idtables.module_of(str(tmp_path / "pk_between_b.py")) == "pk_between_b"


def test_a_file_imported_under_two_names_keeps_the_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    idtables.module_of(str(tmp_path / "warm-up.py"))
    path = str(tmp_path / "pk_twice.py")
    for name in ("pk_first_name", "pk_second_name"):
        mod = types.ModuleType(name)
        mod.__file__ = path
        monkeypatch.setitem(sys.modules, name, mod)
    assert idtables.module_of(path) == "pk_first_name"


def test_a_module_put_back_after_an_import_and_a_removal_hides_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The count unchanged (one import, one removal) and a recorded module newest: the
    walk back stopped at once, and sympy's ``dotproduct.DotProduct`` lost its package
    (memory mode names functions late, at a sampled allocation)."""
    package = tmp_path / "pk_pkg"
    package.mkdir()
    monkeypatch.syspath_prepend(str(tmp_path))
    moved = types.ModuleType("pk_moved2")
    moved.__file__ = str(tmp_path / "pk_moved2.py")
    doomed = types.ModuleType("pk_doomed")
    doomed.__file__ = str(tmp_path / "pk_doomed.py")
    monkeypatch.setitem(sys.modules, "pk_moved2", moved)
    monkeypatch.setitem(sys.modules, "pk_doomed", doomed)
    idtables.module_of(str(tmp_path / "warm-up.py"))
    new = types.ModuleType("pk_pkg.inner")
    new.__file__ = str(package / "inner.py")
    monkeypatch.setitem(sys.modules, "pk_pkg.inner", new)
    del sys.modules["pk_doomed"]  # a failed import takes its modules out again
    del sys.modules["pk_moved2"]
    sys.modules["pk_moved2"] = moved
    assert idtables.module_of(str(package / "inner.py")) == "pk_pkg.inner"
