"""Environment activation of profkit's own profilers: built from the settings, saved at exit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from profkit.calltree import file as profile_file
from profkit.profilers.elt import EltProfiler, SamplingProfiler
from profkit.runner import activation
from profkit.runner.activation import ProfileSaver
from profkit.settings import Settings
from tests.profilers.elt.fake import FakeClock, FakeDriver


def test_standalone_profiler_saves_its_file(tmp_path: object, capsys: Any) -> None:
    # Moved from tests/profilers/elt/test_profiler.py: saving left the profiler for the runner.
    out = Path(str(tmp_path)) / "p.{pid}.json"
    clock = FakeClock()
    settings = Settings(output=str(out), tree=True)
    saver = ProfileSaver(settings, base_dir="")
    prof = EltProfiler(settings, clock=clock, on_profile=saver)
    d = FakeDriver(prof, clock)
    d.leaf("app.work", 7)  # first event: attach has returned, recording starts
    prof.shutdown()
    assert saver.saved_path is not None and "{pid}" not in saver.saved_path
    profile = profile_file.load(saver.saved_path)
    assert [f.name for f in profile.frames] == ["app.work"]
    err = capsys.readouterr().err
    assert "app.work" in err and f"profile saved to {saver.saved_path}" in err


def test_build_uses_from_settings_and_the_environment(tmp_path: Path) -> None:
    env = {"PROFKIT_MODE": "trace", "PROFKIT_BASETIME": "2ms", "PROFKIT_OUTPUT": "x.json"}
    prof = activation.build(SamplingProfiler, env)
    assert isinstance(prof, SamplingProfiler)
    assert prof.settings.mode == "sample" and prof.settings.basetime_ns == 2_000_000
    assert isinstance(prof.on_profile, ProfileSaver)


def test_build_calls_other_factories_with_no_arguments() -> None:
    made: list[object] = []

    def factory() -> object:
        made.append(object())
        return made[-1]

    assert activation.build(factory, {"PROFKIT_BASETIME": "not a duration"}) is made[0]


def test_a_disowned_profiler_saves_nothing(tmp_path: Path, capsys: Any) -> None:
    prof = activation.build(EltProfiler, {"PROFKIT_OUTPUT": str(tmp_path / "o.json")})
    activation.disown()
    assert prof.on_profile is not None
    prof.on_profile(prof.build_profile())
    assert not list(tmp_path.iterdir()) and capsys.readouterr().err == ""


def test_profilers_need_their_settings() -> None:
    with pytest.raises(TypeError, match="needs its settings"):
        EltProfiler()
