"""pytest fixtures for oracle tests against real llvm-profdata outputs.

``llvm_profdata(22)`` returns the path of llvm-profdata-22 or skips the test when that tool is
not installed; ``instrprof_manifest`` is the parsed fixture manifest.  Plain helpers (the
``fixtures()`` iterator for parametrizing) live in :mod:`tests.oracle.helpers`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.oracle.helpers import llvm_profdata_path, load_manifest


@pytest.fixture
def llvm_profdata() -> Callable[[int], str]:
    """Factory: ``llvm_profdata(version)`` -> tool path, or skip when it is absent."""

    def get(version: int) -> str:
        path = llvm_profdata_path(version)
        if path is None:
            pytest.skip(f"llvm-profdata-{version} is not installed")
        return path

    return get


@pytest.fixture(scope="session")
def instrprof_manifest() -> dict[str, Any]:
    """The parsed tests/fixtures/instrprof/MANIFEST.json."""
    return load_manifest()
