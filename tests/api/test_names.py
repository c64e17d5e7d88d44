"""The one naming rule (api/names.py): module of a file or function, profkit's own code,
prefixes split, checked and matched; every former copy now reads it."""

from __future__ import annotations

import os

import pytest

from profkit.api import names


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, ()),
        ("", ()),
        (" myapp , lib.core ,, ", ("myapp", "lib.core")),
        (["a", " ", "b.c"], ("a", "b.c")),
    ],
)
def test_prefixes_split_one_way(value: object, expected: tuple[str, ...]) -> None:
    assert names.split_prefixes(value) == expected  # type: ignore[arg-type]


def test_settings_and_report_parse_prefixes_through_the_rule() -> None:
    from profkit.report.tree import parse_prefixes as report_prefixes
    from profkit.settings.parse import Invalid
    from profkit.settings.parse import parse_prefixes as settings_prefixes

    assert settings_prefixes("myapp, lib.core") == ("myapp", "lib.core")
    with pytest.raises(Invalid, match="'my-app' is not a module path"):
        settings_prefixes("my-app")
    assert report_prefixes("myapp., lib.core") == ("myapp", "lib.core")  # forgiving


def test_module_paths() -> None:
    assert names.is_module_path("a.b_c.D1")
    assert not names.is_module_path("a..b") and not names.is_module_path("1a")


def test_frozen_and_main_module_naming() -> None:
    assert names.frozen_module("<frozen runpy>") == "runpy"
    assert names.frozen_module("<string>") is None
    assert names.function_module("<frozen runpy>", "", None) == "runpy"
    assert names.function_module("/x/cli.py", "__main__", ("/x/cli.py", "app.cli")) == "app.cli"
    assert names.function_module("/x/y.py", "y", ("/x/cli.py", "app.cli")) == "y"


def test_module_of_a_file() -> None:
    assert names.module_of(os.__file__) == "os"
    assert names.module_of("<frozen importlib._bootstrap>") == "importlib._bootstrap"
    assert names.module_of("<string>") == ""
    assert names.module_of("/nowhere/never_imported_pk.py") == "never_imported_pk"


def test_own_code_and_internal_modules() -> None:
    from profkit.collect import catalog, idtables
    from profkit.profilers.elt import names as elt_names
    from profkit.report import rules

    assert names.is_own_code(catalog.__file__) and names.is_own_code(names.__file__)
    assert not names.is_own_code(os.__file__)
    assert catalog._OWN_DIRS is names.OWN_CODE_DIRS
    assert idtables.module_of is names.module_of
    assert elt_names.INTERNAL_MODULES is names.INTERNAL_MODULES is rules.INTERNAL_MODULES
    assert names.is_profkit_module("profkit.runner.session")
    assert not names.is_profkit_module("profkit.demo")
    assert os.path.basename(names.PROFKIT_MAIN) == "__main__.py"
