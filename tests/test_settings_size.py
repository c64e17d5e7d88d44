"""``--alloc-sample`` / ``PROFKIT_ALLOC_SAMPLE``: sizes in bytes, binary units, exact round trip."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from profkit.errors import SettingsError
from profkit.settings import Settings
from profkit.settings.parse import Invalid, format_size, parse_size


@pytest.mark.parametrize(
    ("text", "size"),
    [("1", 1), ("4096", 4096), ("64k", 65536), ("512KiB", 524288), ("1.5m", 1572864),
     (" 2 MB ", 2 * 1024**2), ("1g", 1024**3), ("1TiB", 1024**4)],
)  # fmt: skip
def test_sizes(text: str, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize(
    "text", ["", "0", "0.4", "-1", "k", "12 parsecs", "2TiB", "1e9", "9" * 500]
)
def test_bad_sizes(text: str) -> None:
    with pytest.raises(Invalid):
        parse_size(text)


@given(st.integers(1, 1024**4))
def test_format_round_trips(size: int) -> None:
    assert parse_size(format_size(size)) == size


def test_the_setting_names_its_variable() -> None:
    assert Settings().alloc_sample_bytes == 512 * 1024
    assert Settings.from_env({"PROFKIT_ALLOC_SAMPLE": "64k"}).alloc_sample_bytes == 65536
    with pytest.raises(SettingsError, match="PROFKIT_ALLOC_SAMPLE='none'"):
        Settings.from_env({"PROFKIT_ALLOC_SAMPLE": "none"})
    again = Settings.from_env(Settings(mode="memory", alloc_sample_bytes=3000).serialize())
    assert again.alloc_sample_bytes == 3000 and again.mode == "memory"
