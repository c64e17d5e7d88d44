"""The export registry: one table drives names, help, default names and dispatch."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from profkit.errors import UsageError
from profkit.export import registry
from tests.calltree.strategies import deep_profile, sample_profile


def test_the_native_format_is_a_row_but_not_an_export() -> None:
    assert registry.FORMATS[0] is registry.NATIVE and registry.NATIVE not in registry.EXPORTS
    assert registry.all_names() == ["profile", *registry.names()]
    assert len({f.extension for f in registry.FORMATS}) == len(registry.FORMATS)
    with pytest.raises(UsageError, match="unknown export format 'profile'"):
        registry.get("profile")


def test_every_format_has_a_writer_and_unique_name_and_extension() -> None:
    assert len(set(registry.names())) == len(registry.EXPORTS)
    assert len({f.extension for f in registry.EXPORTS}) == len(registry.EXPORTS)
    for f in registry.EXPORTS:
        assert callable(f.writer)
        assert f.name in registry.help_text()


@pytest.mark.parametrize("name", registry.names())
def test_every_format_writes_sample_and_deep_profiles(tmp_path: Path, name: str) -> None:
    for prof in (sample_profile(), deep_profile(1200)):
        out = tmp_path / ("x" + registry.get(name).extension)
        registry.export(prof, name, out)
        assert out.stat().st_size > 0
        umask = os.umask(0o22)
        os.umask(umask)
        assert out.stat().st_mode & 0o777 == 0o666 & ~umask  # not mkstemp's 0600


def test_unknown_format_lists_choices() -> None:
    with pytest.raises(UsageError, match="choose from html, speedscope"):
        registry.get("svg")


@pytest.mark.parametrize(
    ("inp", "out"),
    [
        ("run.pkprof.json.gz", "run.html"),
        ("dir/p.json", "dir/p.html"),
        ("x", "x.html"),
        (".json", ".json.html"),
    ],
)
def test_default_output(inp: str, out: str) -> None:
    assert registry.default_output(inp, registry.get("html")) == out
