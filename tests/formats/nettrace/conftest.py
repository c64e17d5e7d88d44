"""Shared paths and readers for the nettrace tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from profkit.formats.nettrace import Trace, read_nettrace

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "nettrace"
RUNTIME_TRACE = FIXTURES / "spinner_runtime.nettrace"
SAMPLES_TRACE = FIXTURES / "spinner_samples.nettrace"


@pytest.fixture(scope="session")
def runtime_bytes() -> bytes:
    return RUNTIME_TRACE.read_bytes()


@pytest.fixture(scope="session")
def samples_bytes() -> bytes:
    return SAMPLES_TRACE.read_bytes()


@pytest.fixture(scope="session")
def runtime_trace(runtime_bytes: bytes) -> Trace:
    return read_nettrace(runtime_bytes, RUNTIME_TRACE.name)
