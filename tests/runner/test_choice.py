"""The choice table: one row per (target kind, mode); unavailable engines give way, saying why."""

from __future__ import annotations

import sys
import types
from dataclasses import dataclass

import pytest

from profkit.errors import UsageError
from profkit.runner import choice
from profkit.runner.choice import CHOICES, ProfilerChoice, choose
from profkit.settings import Settings


@dataclass(frozen=True)
class _Target:
    kind: str
    label: str = "t"


class _Never:
    def unavailable(self, job: object) -> str | None:
        return "reading another process is not allowed here"


class _Always:
    def unavailable(self, job: object) -> str | None:
        return None


@pytest.fixture
def fake_engines(monkeypatch: pytest.MonkeyPatch) -> None:
    module = types.ModuleType("pk_fake_engines")
    module.Never = _Never  # type: ignore[attr-defined]
    module.Always = _Always  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pk_fake_engines", module)


def test_every_python_mode_has_a_row() -> None:
    for mode in ("trace", "sample"):
        rows = [r for r in CHOICES if r.mode == mode and "script" in r.kinds]
        assert rows and rows[-1].engine == "profkit.runner.inprocess:InProcessEngine"
        assert rows[-1].profiler.startswith("profkit.profilers.elt:")


def test_an_unavailable_engine_gives_way_and_says_why(
    fake_engines: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = (
        ProfilerChoice("sample", ("script",), "pk_fake_engines:Never", ""),
        ProfilerChoice("sample", ("script",), "pk_fake_engines:Always", "x:Y"),
    )
    monkeypatch.setattr(choice, "CHOICES", rows)
    said: list[str] = []
    row, engine = choose(_Target("script"), Settings(mode="sample"), said.append)
    assert row is rows[1] and isinstance(engine, _Always)
    assert said == ["profkit: note: reading another process is not allowed here; using Always\n"]


def test_no_row_is_a_usage_error(fake_engines: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        choice, "CHOICES", (ProfilerChoice("trace", ("script",), "pk_fake_engines:Never", ""),)
    )
    with pytest.raises(UsageError, match=r"cannot run a script target .*not allowed"):
        choose(_Target("script"), Settings(), lambda _: None)
    with pytest.raises(UsageError, match="--mode trace cannot run a dotnet-ish target"):
        choose(_Target("dotnet-ish"), Settings(), lambda _: None)
