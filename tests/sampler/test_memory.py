"""Which reads the sampler makes: ``PROFKIT_NATIVE`` through the settings table."""

from __future__ import annotations

import os

import pytest

from profkit.errors import SettingsError
from profkit.sampler import memory
from profkit.sampler.errors import AttachError

pytestmark = pytest.mark.skipif(not hasattr(os, "getpid"), reason="needs a pid")


@pytest.mark.parametrize(("value", "native"), [("auto", True), ("on", True), ("OFF", False)])
def test_native_follows_the_setting(
    monkeypatch: pytest.MonkeyPatch, value: str, native: bool
) -> None:
    monkeypatch.setenv("PROFKIT_NATIVE", value)
    assert memory.native_wanted(True) is native
    if value != "on":
        assert memory.native_wanted(False) is False


def test_a_misspelt_value_is_reported_like_any_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    """``of`` used to mean "on" here (anything but ``off`` did)."""
    monkeypatch.setenv("PROFKIT_NATIVE", "of")
    with pytest.raises(SettingsError, match=r"^PROFKIT_NATIVE='of': expected one of auto, on, off"):
        memory.Memory(os.getpid())


def test_on_requires_the_c_part(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROFKIT_NATIVE", "on")
    with pytest.raises(AttachError, match="not built"):
        memory.native_wanted(False)
