"""Skipping a backend by what it can deliver, never by its name."""

from __future__ import annotations

import pytest

from profkit.api import EventMask
from profkit.collect.backends import capabilities
from profkit.collect.select import TRACING_BITS


def require(backend: str, mask: EventMask) -> None:
    """Skip the test unless ``backend`` can deliver every tracing event of ``mask``."""
    missing = mask & TRACING_BITS & ~capabilities(backend).events
    if missing:
        pytest.skip(f"the {backend} backend cannot deliver {EventMask(missing)!r}")
