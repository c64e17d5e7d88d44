"""Without its C hot path, trace mode says so plainly (issue 25, item 16).

pip hides the build's warning unless ``-v``, and a module that was never built made
``--native on`` fail with Python's "(most likely due to a circular import)". Now the
reason names the missing build, and a run that fell back on its own (``auto``) ends
with one line saying so and how to mend it.
"""

from __future__ import annotations

import pytest

from profkit.profilers.elt import native
from profkit.profilers.elt.profiler import EltProfiler
from profkit.settings import Settings


def test_a_module_never_built_is_not_called_a_circular_import() -> None:
    exc = ImportError(
        "cannot import name '_native' from partially initialized module "
        "'profkit.profilers.elt' (most likely due to a circular import)"
    )
    assert native.import_failure(exc).startswith("it was not built")
    assert (
        native.import_failure(ImportError("undefined symbol: PyFoo")) == "undefined symbol: PyFoo"
    )


def test_auto_says_it_fell_back(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(native, "Recorder", None)
    monkeypatch.setattr(native, "_IMPORT_ERROR", "it was not built when profkit was installed")
    note = native.missing_note("auto")
    assert note is not None and "pure-Python recorder" in note and "not built" in note
    assert native.missing_note("off") is None
    profiler = EltProfiler(Settings(), standalone=False)
    assert profiler.notes == [note]


def test_nothing_is_said_when_the_c_part_is_here() -> None:
    if native.Recorder is None:
        pytest.skip("the C recorder is not built here")
    assert native.missing_note("auto") is None
    assert EltProfiler(Settings(), standalone=False).notes == []
