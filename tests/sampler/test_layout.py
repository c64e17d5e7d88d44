"""``PROFKIT_SAMPLER_LAYOUT`` read through the settings table: a typo is an error."""

from __future__ import annotations

import pytest

from profkit.errors import SettingsError
from profkit.sampler.layout import from_table

V3_11_99 = 0x030B63F0  # 3.11.99 final: no measured table


def test_an_unmeasured_release_is_read_with_its_minors_layout_checked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """It used to be refused (N22: Debian 12's 3.11.2); now it is checked on the target."""
    monkeypatch.delenv("PROFKIT_SAMPLER_LAYOUT", raising=False)
    lay = from_table(V3_11_99)
    assert (lay.assumed_from, lay.verify) == ("3.11.7", True)


def test_an_assumed_layout_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROFKIT_SAMPLER_LAYOUT", " 3.11.7 ")
    assert from_table(V3_11_99).version == "3.11.99"


@pytest.mark.parametrize("value", ["3.11.77", "3.11", "latest"])
def test_a_misspelt_layout_is_reported_like_any_setting(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    """It used to be ignored silently (the error then said to set what was set)."""
    monkeypatch.setenv("PROFKIT_SAMPLER_LAYOUT", value)
    with pytest.raises(SettingsError, match=rf"^PROFKIT_SAMPLER_LAYOUT='{value}': expected one"):
        from_table(V3_11_99)
