"""Backend parametrization: every collector available on this interpreter."""

from __future__ import annotations

import pytest

from profkit.collect import detach, setprofile
from profkit.collect.select import unavailable

TRACING = [b for b in ("monitoring", "evalframe", "setprofile") if unavailable(b) is None]
#: setprofile twice where its C dispatcher (_profhook) is built: in C, and in Python.
DISPATCHERS = [
    *TRACING,
    *(["setprofile-python"] if "setprofile" in TRACING and setprofile._profhook else []),
]


@pytest.fixture(params=DISPATCHERS)
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "setprofile-python":
        monkeypatch.setattr(setprofile, "_profhook", None)
        return "setprofile"
    return str(request.param)


@pytest.fixture(autouse=True)
def _always_detach() -> object:
    yield
    detach()
