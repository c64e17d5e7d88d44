"""Backend parametrization: every collector available on this interpreter."""

from __future__ import annotations

import pytest

from profkit.collect import detach
from profkit.collect.select import unavailable

TRACING = [b for b in ("monitoring", "setprofile") if unavailable(b) is None]


@pytest.fixture(params=TRACING)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(autouse=True)
def _always_detach() -> object:
    yield
    detach()
