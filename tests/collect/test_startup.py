"""The start-up hook's pieces, in-process: settings parsing and profiler lookup."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path
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


def test_process_startup_once(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
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


@pytest.mark.parametrize(
    ("value", "native"), [("off", False), (" OFF ", False), ("auto", True), (None, True)]
)
def test_native_variable_reaches_the_session(
    value: str | None, native: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(startup, "_done", False)
    monkeypatch.setenv(startup.ENABLE_VAR, "1")
    monkeypatch.setenv(startup.PROFILER_VAR, "tests.collect.profilers:FileRecorder")
    monkeypatch.delenv("PROFKIT_BACKEND", raising=False)
    if value is None:
        monkeypatch.delenv(startup.NATIVE_VAR, raising=False)
    else:
        monkeypatch.setenv(startup.NATIVE_VAR, value)
    try:
        session = startup.process_startup()
        assert session is not None and session.info.native is native
    finally:
        detach()


BAD_MODULES = {
    "pk_bad_syntax": "def f(:\n",
    "pk_bad_import": "import pk_no_such_dependency\n",
    "pk_exits": "import sys\nsys.exit(4)\n",
    "pk_not_profiler": "class Thing:\n    pass\n\ndef make():\n    return 42\n",
}


@pytest.mark.parametrize(
    ("spec", "why"),
    [
        ("pk_no_such_module:X", "ModuleNotFoundError"),
        ("pk_not_profiler:Missing", "AttributeError"),
        ("pk_not_profiler:Thing", "is not a profkit.api.ProfilerCallback"),
        ("pk_not_profiler:make", "a builtins.int object is not a profkit.api.ProfilerCallback"),
        ("pk_bad_syntax:X", "SyntaxError"),
        ("pk_bad_import:X", "ModuleNotFoundError"),
        ("pk_exits:X", "SystemExit: 4"),
        ("pk_not_profiler:", "AttributeError"),
        ("no_colon_no_entry_point", "LookupError"),
    ],
)
def test_bad_profiler_settings_one_line(
    spec: str,
    why: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Each bad PROFKIT_PROFILER is one clear stderr line and no profiler (a non-profiler
    class used to be reported as "failed in initialize: AttributeError ..."; a module
    calling sys.exit() at import ended the program before it started)."""
    for name, text in BAD_MODULES.items():
        (tmp_path / f"{name}.py").write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in BAD_MODULES:
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.setattr(startup, "_done", False)
    monkeypatch.setenv(startup.ENABLE_VAR, "1")
    monkeypatch.setenv(startup.PROFILER_VAR, spec)
    assert startup.process_startup() is None
    assert current_session() is None
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"profkit: cannot attach profiler {spec!r}: ")
    assert why in lines[0]


PTH_LINE = (Path(__file__).parents[2] / "src/profkit/collect/profkit_startup.pth").read_text()


@pytest.mark.parametrize("enabled", [True, False])
def test_pth_line_survives_a_broken_install(enabled: bool, tmp_path: Path) -> None:
    """The start-up line runs in every Python process: an uninstalled or broken profkit
    must not break any of them (it used to print site's "Error processing line 1"
    traceback). Unprofiled processes must not even import profkit."""
    broken = tmp_path / "profkit"
    broken.mkdir()
    (broken / "__init__.py").write_text("raise ImportError('half-installed')\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROFKIT_")}
    env["PYTHONPATH"] = str(tmp_path)
    if enabled:
        env[startup.ENABLE_VAR] = "1"
        env[startup.PROFILER_VAR] = "anything:Here"
    program = f"exec({PTH_LINE!r})\nimport sys\nprint('profkit' in sys.modules)\nsys.exit(5)"
    proc = subprocess.run(
        [sys.executable, "-S", "-c", program], env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 5
    if enabled:
        assert proc.stderr.splitlines() == [
            "profkit: cannot attach profiler: profkit is not importable: ImportError: half-installed"
        ]
    else:
        assert proc.stderr == ""
        assert proc.stdout == "False\n"


def test_pth_is_one_import_line() -> None:
    """site.py executes a .pth line only if it starts with ``import``; one line only."""
    assert PTH_LINE.count("\n") == 1 and PTH_LINE.startswith("import os;")


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, 0.001),
        ({"PROFKIT_INTERVAL": "250us"}, 0.00025),
        ({"PROFKIT_INTERVAL": "5ms", "PROFKIT_SAMPLE_INTERVAL": "0.002"}, 0.002),
    ],
)
def test_sample_interval_accepts_the_user_facing_variable(
    env: dict[str, str], expected: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PROFKIT_INTERVAL", raising=False)
    monkeypatch.delenv("PROFKIT_SAMPLE_INTERVAL", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert startup._sample_interval() == pytest.approx(expected)


def test_bad_user_interval_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PROFKIT_SAMPLE_INTERVAL", raising=False)
    monkeypatch.setenv("PROFKIT_INTERVAL", "soon")
    with pytest.raises(Exception, match="duration"):
        startup._sample_interval()


def test_a_bad_profkit_setting_does_not_stop_a_profiler_that_never_reads_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The start-up hook reads its own variables one at a time from the settings table:
    a bad PROFKIT_BASETIME concerns the ELT profiler, not a user's profiler."""
    monkeypatch.setattr(startup, "_done", False)
    monkeypatch.setenv(startup.ENABLE_VAR, "1")
    monkeypatch.setenv(startup.PROFILER_VAR, "tests.collect.profilers:FileRecorder")
    monkeypatch.setenv("PROFKIT_BASETIME", "soon")
    monkeypatch.delenv("PROFKIT_BACKEND", raising=False)
    try:
        assert startup.process_startup() is not None
    finally:
        detach()
    assert capsys.readouterr().err == ""


def test_startup_never_writes_into_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(startup, "_done", False)
    monkeypatch.setenv(startup.ENABLE_VAR, "1")
    monkeypatch.setenv(startup.PROFILER_VAR, "profkit.profilers.elt:SamplingProfiler")
    monkeypatch.setenv("PROFKIT_INTERVAL", "20ms")
    monkeypatch.setenv("PROFKIT_TREE", "0")
    monkeypatch.delenv("PROFKIT_SAMPLE_INTERVAL", raising=False)
    monkeypatch.delenv("PROFKIT_BACKEND", raising=False)
    before = dict(os.environ)
    try:
        session = startup.process_startup()
        assert session is not None
        from profkit.runner import activation

        activation.disown()  # a test process: save nothing at detach
    finally:
        detach()
    assert dict(os.environ) == before  # PROFKIT_INTERVAL used to be copied into ..._SAMPLE_INTERVAL
