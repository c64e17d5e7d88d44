"""The package's lazy exports (PEP 562) and what ``profdata show`` imports.

Every public name resolves to the object of its defining module; importing a
submodule never shadows an export (the overlap code lives in ``overlap_calc`` because
the function ``overlap`` once lost to its own module); ``profkit profdata show`` loads
neither numpy nor the writers, merge or overlap (nor the raw reader, for an indexed file).
"""

from __future__ import annotations

import importlib
import json
import pkgutil
import subprocess
import sys
import types
from pathlib import Path

import pytest

import profkit.formats.instrprof as instrprof
from tests.formats.instrprof.fixtures import ROOT


def test_every_export_resolves_to_its_module_object() -> None:
    for name in instrprof.__all__:
        value = getattr(instrprof, name)
        module = importlib.import_module(f"profkit.formats.instrprof.{instrprof._EXPORTS[name]}")
        assert value is getattr(module, name), name
        assert not isinstance(value, types.ModuleType), name
    assert sorted(instrprof.__all__) == sorted(instrprof._EXPORTS)
    assert set(instrprof.__all__) <= set(dir(instrprof))


def test_no_export_is_named_like_a_submodule() -> None:
    """Importing such a submodule would replace the exported object with the module."""
    submodules = {m.name for m in pkgutil.iter_modules(instrprof.__path__)}
    assert "reader" in submodules
    assert not submodules & set(instrprof.__all__)


def test_overlap_is_the_function_after_its_module_is_imported() -> None:
    importlib.import_module("profkit.formats.instrprof.overlap_calc")
    importlib.import_module("profkit.present.instrprof.llvm_overlap")
    from profkit.formats.instrprof import overlap
    from profkit.present.instrprof import format_overlap

    assert callable(overlap) and callable(format_overlap)
    assert not isinstance(overlap, types.ModuleType)
    assert not isinstance(format_overlap, types.ModuleType)


def test_star_import_and_unknown_names() -> None:
    namespace: dict[str, object] = {}
    exec("from profkit.formats.instrprof import *", namespace)
    assert {"read_profile", "overlap", "MergeInput", "write_indexed"} <= set(namespace)
    try:
        instrprof.no_such_name  # noqa: B018
    except AttributeError as exc:
        assert "no_such_name" in str(exc)
    else:
        raise AssertionError("unknown attribute did not raise")


_PROBE = """
import json, sys
from profkit.cli.main import main
rc = main(["profdata", "show", "--all-functions", "--counts", sys.argv[1]])
loaded = sorted(m for m in sys.modules if m.startswith(("numpy", "profkit.formats", "profkit.present")))
print(json.dumps({"rc": rc, "loaded": loaded}), file=sys.stderr)
"""


def test_show_imports_only_what_it_needs() -> None:
    fixture = ROOT / "clang16" / "ir_entry.profdata"
    if not fixture.exists():
        pytest.skip("instrprof fixtures are absent")
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, str(fixture)], capture_output=True, text=True, timeout=60
    )
    report = json.loads(proc.stderr.strip().splitlines()[-1])
    assert report["rc"] == 0
    loaded = set(report["loaded"])
    assert not any(m.startswith("numpy") for m in loaded)
    unneeded = (
        "merge",
        "merge.files",
        "merge.raw_arrays",
        "merge.raw_shape",
        "indexed_writer",
        "overlap_calc",
        "text",
        "raw",
    )
    for heavy in unneeded:
        assert f"profkit.formats.instrprof.{heavy}" not in loaded, heavy
    assert "profkit.present.instrprof.llvm_show" in loaded  # the probe sees the modules
    for heavy in ("json_show", "llvm_overlap"):
        assert f"profkit.present.instrprof.{heavy}" not in loaded, heavy


_MERGE_PROBE = """
import json, sys
from profkit.cli.main import main
rc = main(["profdata", "merge", "-o", sys.argv[1], sys.argv[2], sys.argv[2]])
loaded = sorted(m for m in sys.modules if m.startswith(("numpy", "multiprocessing")))
print(json.dumps({"rc": rc, "loaded": loaded}), file=sys.stderr)
"""


def test_merging_indexed_files_needs_no_numpy(tmp_path: Path) -> None:
    """numpy comes with the raw-file fast path only; multiprocessing only with workers."""
    fixture = ROOT / "clang16" / "ir_entry.profdata"
    if not fixture.exists():
        pytest.skip("instrprof fixtures are absent")
    out = tmp_path / "merged.profdata"
    proc = subprocess.run(
        [sys.executable, "-c", _MERGE_PROBE, str(out), str(fixture)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    report = json.loads(proc.stderr.strip().splitlines()[-1])
    assert report["rc"] == 0 and out.exists()
    assert report["loaded"] == []
