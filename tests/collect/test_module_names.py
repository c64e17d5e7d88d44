"""Module names of functions: a script that replaced ``__main__`` is named ``__main__``."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

from profkit.collect import registry


def test_replaced_main_module_is_found_without_a_length_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = tmp_path / "aio_script.py"
    script.write_text("x = 1\n")
    registry.module_of(str(tmp_path / "warm-up.py"))  # the cache has scanned sys.modules
    fake_main = types.ModuleType("__main__")
    fake_main.__file__ = str(script)
    monkeypatch.setitem(sys.modules, "__main__", fake_main)  # same length as before
    assert registry.module_of(str(script)) == "__main__"


def test_unknown_file_falls_back_to_its_stem(tmp_path: Path) -> None:
    assert registry.module_of(str(tmp_path / "never_imported.py")) == "never_imported"
