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


# The grammar of durations and sizes, as the regular expressions profkit used until it read
# them by hand (a compile cost each forked child ~2 ms): the parsers must agree with them on
# any text (sizes: units in ASCII case only; re.I also folded the Kelvin sign and dotted I).
_DURATION_PATTERN = r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(ns|us|µs|ms|s)?\s*$"  # re.ASCII
_SIZE_PATTERN = r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(b|k|kb|kib|m|mb|mib|g|gb|gib|t|tb|tib)?\s*$"
_UNIT_NS = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
_PIECES = list("0123456789.  \t\nusmnµkKbBiIgGtTMS\u0663\u00a0\u2003xe-+")


def _by_pattern_duration(text: str) -> int | None:
    import re

    match = re.match(_DURATION_PATTERN, text, re.ASCII)
    if not match:
        return None
    ns = float(match.group(1)) * _UNIT_NS[match.group(2) or "us"]
    return round(ns) if ns <= 7 * 86_400 * 10**9 else None


def _by_pattern_size(text: str) -> int | None:
    import re

    match = re.match(_SIZE_PATTERN, text, re.I)
    if not match:
        return None
    size = float(match.group(1)) * 1024 ** "bkmgt".index((match.group(2) or "b")[0].lower())
    return round(size) if 1 <= size <= 1024**4 else None


def _or_none(parse: object, text: str) -> int | None:
    try:
        return parse(text)  # type: ignore[operator,no-any-return]
    except Invalid:
        return None


@given(st.lists(st.sampled_from(_PIECES), max_size=8).map("".join))
def test_durations_and_sizes_read_by_hand_follow_the_grammar(text: str) -> None:
    from profkit.settings.parse import parse_duration

    assert _or_none(parse_duration, text) == _by_pattern_duration(text)
    assert _or_none(parse_size, text) == _by_pattern_size(text)
