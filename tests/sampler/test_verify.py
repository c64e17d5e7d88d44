"""Patch releases without a table of their own: the series table, and the live check of
an assumed layout (a right one passes on real targets, a wrong one is refused, saying so)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from profkit._record import replace
from profkit.errors import SettingsError
from profkit.sampler.errors import AttachError
from profkit.sampler.layout import SERIES, from_table
from profkit.sampler.locate import Target, locate
from profkit.sampler.reader import StackReader
from tests.sampler.conftest import SLEEPER, interpreter
from tests.sampler.conftest import Target as Program


def _hex(major: int, minor: int, patch: int, level: int = 0xF, serial: int = 0) -> int:
    return major << 24 | minor << 16 | patch << 8 | level << 4 | serial


@pytest.fixture(autouse=True)
def _no_forced_layout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PROFKIT_SAMPLER_LAYOUT", raising=False)


@pytest.mark.parametrize(
    ("release", "assumed", "verify"),
    [
        ((3, 11, 2), "", False),  # Debian 12: measured
        ((3, 11, 7), "", False),
        ((3, 12, 1), "", False),
        ((3, 11, 0), "3.11.7", False),  # in the known range
        ((3, 11, 5), "3.11.7", False),
        ((3, 12, 0), "3.12.1", False),
        ((3, 11, 9), "3.11.7", True),  # past it: checked on the target
        ((3, 12, 3), "3.12.1", True),  # Ubuntu 24.04
        ((3, 12, 13), "3.12.1", True),
    ],
)
def test_every_patch_release_of_a_minor_gets_its_layout(
    release: tuple[int, int, int], assumed: str, verify: bool
) -> None:
    lay = from_table(_hex(*release))
    assert lay.version == ".".join(map(str, release))
    assert (lay.assumed_from, lay.verify) == (assumed, verify)
    assert lay.provenance == (assumed + (", checked" if verify else "") if assumed else "own")


def test_a_pre_release_is_always_checked() -> None:
    lay = from_table(_hex(3, 12, 0, 0xC, 1))
    assert (lay.version, lay.assumed_from, lay.verify) == ("3.12.0rc1", "3.12.1", True)
    assert from_table(_hex(3, 11, 0, 0xB, 3)).verify


def test_the_series_table_names_measured_layouts() -> None:
    from profkit.sampler._offsets import LAYOUTS

    for minor, series in SERIES.items():
        assert series.layout in LAYOUTS and series.layout.startswith(minor + ".")
        assert series.first <= int(series.layout.rsplit(".", 1)[1]) <= series.last


def test_a_forced_layout_is_used_unchecked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROFKIT_SAMPLER_LAYOUT", "3.11.7")
    lay = from_table(_hex(3, 11, 9))
    assert (lay.assumed_from, lay.verify) == ("3.11.7", False)


def test_a_forced_layout_of_another_minor_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROFKIT_SAMPLER_LAYOUT", "3.12.1")
    with pytest.raises(AttachError, match=r"3\.12\.1 is not a layout of 3\.11"):
        from_table(_hex(3, 11, 9))
    monkeypatch.setenv("PROFKIT_SAMPLER_LAYOUT", "3.12")
    with pytest.raises(SettingsError):
        from_table(_hex(3, 11, 9))


def test_other_minors_are_refused() -> None:
    with pytest.raises(AttachError, match=r"3\.10\.2"):
        from_table(_hex(3, 10, 2))


# ---- the live check -------------------------------------------------------------------

#: Wrong offsets the check must notice: (field, shift in bytes). co_name - 8 is
#: co_filename in 3.11 and 3.12 (a str, but no function name).
WRONG = [
    ("tstate_native_thread_id", 8),
    ("tstate_next", 8),
    ("tstate_interp", 8),
    ("tstate_cframe", 8),
    ("cframe_current_frame", 8),
    ("frame_code", 8),
    ("code_name", -8),
    ("interp_threads_head", 8),
    ("runtime_interpreters_head", -8),
]


def _unknown_patch(target: Target) -> Target:
    """The same target, as if its release were a patch past the known range."""
    lay = replace(target.layout, assumed_from=target.layout.version, verify=True)
    return replace(target, layout=lay)


@pytest.fixture(scope="module")
def sleepers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Program]]:
    """One SLEEPER per version, shared by the module's tests (each only reads it)."""
    started: dict[str, Program] = {}
    yield started
    for program in started.values():
        program.stop()


@pytest.fixture(params=["3.11", "3.12"])
def sleeper(request: pytest.FixtureRequest, sleepers: dict[str, Program], tmp_path_factory):
    version = request.param
    if version not in sleepers:
        python = interpreter(version)
        sleepers[version] = Program(python, SLEEPER, tmp_path_factory.mktemp(version))
    return sleepers[version]


def test_a_right_layout_passes_the_check(sleeper):
    t = sleeper
    found = _unknown_patch(locate(t.pid))
    reader = StackReader(found)
    reader.check()
    names = {code.name for s in reader.sample() for code, _ in s.frames}
    assert {"__main__.main", "__main__.napping"} <= names


@pytest.mark.parametrize(("field", "shift"), WRONG)
def test_a_wrong_layout_is_refused_with_the_message(sleeper, field, shift):
    t = sleeper
    found = _unknown_patch(locate(t.pid))
    bad = replace(found.layout, **{field: getattr(found.layout, field) + shift})
    with pytest.raises(AttachError) as caught:
        StackReader(replace(found, layout=bad)).check()
    message = str(caught.value)
    assert message.startswith(f"pid {t.pid}: ")
    assert "do not match this build" in message or "does not match this build" in message
    assert "\n" not in message
