"""The start-up hook's pieces, in-process: settings parsing and profiler lookup."""

from __future__ import annotations

from importlib import metadata
from typing import Any

import pytest

from profkit.collect import current_session, detach, startup
from tests.collect.profilers import FileRecorder


def test_enabled_values() -> None:
    for value in ("1", "true", "YES", " on "):
        assert startup.enabled({startup.ENABLE_VAR: value})
    for value in ("0", "", "false", "off", "2"):
        assert not startup.enabled({startup.ENABLE_VAR: value})
    assert not startup.enabled({})


def test_load_by_import_path() -> None:
    assert startup.load_profiler("tests.collect.profilers:FileRecorder") is FileRecorder


def test_load_by_entry_point(monkeypatch: pytest.MonkeyPatch) -> None:
    ep = metadata.EntryPoint(
        "recorder", "tests.collect.profilers:FileRecorder", startup.ENTRY_POINT_GROUP
    )

    def fake(**kw: Any) -> list[metadata.EntryPoint]:
        return [ep] if kw.get("group") == startup.ENTRY_POINT_GROUP else []

    monkeypatch.setattr(metadata, "entry_points", fake)
    assert startup.load_profiler("recorder") is FileRecorder
    with pytest.raises(LookupError, match="no profiler named 'other'"):
        startup.load_profiler("other")


def test_process_startup_once(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(startup, "_done", False)
    monkeypatch.setenv(startup.ENABLE_VAR, "1")
    monkeypatch.setenv(startup.PROFILER_VAR, "tests.collect.profilers:FileRecorder")
    monkeypatch.setenv(startup.INTERVAL_VAR, "0.002")
    monkeypatch.delenv("PROFKIT_BACKEND", raising=False)
    try:
        session = startup.process_startup()
        assert session is not None and current_session() is session
        assert startup.process_startup() is None  # the .pth ran twice: no second profiler
    finally:
        detach()
    monkeypatch.setattr(startup, "_done", False)
    monkeypatch.setenv(startup.INTERVAL_VAR, "soon")
    assert startup.process_startup() is None
    assert "profkit: cannot attach profiler" in capsys.readouterr().err
