"""Shared paths for the perf-map tests."""

from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "perfmap"
R2RMAP_SAMPLE = FIXTURES / "System.ComponentModel.EventBasedAsync.ni.r2rmap"
DOTNET_MAP_SAMPLE = FIXTURES / "dotnet-info.map"


@pytest.fixture
def r2rmap_bytes() -> bytes:
    return R2RMAP_SAMPLE.read_bytes()


@pytest.fixture
def dotnet_map_bytes() -> bytes:
    return DOTNET_MAP_SAMPLE.read_bytes()
