"""Every ELT profiler test runs on both trace-mode hot paths: the C recorder and pure Python.

``native`` is the C recorder (``csrc/*.c``) where it was built; ``python`` hides it, as on
a machine without a compiler. The plain-path tests then exercise both implementations of
the same rules (and the event-line and timeline tests, which never use C, run twice).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from profkit.profilers.elt import native


@pytest.fixture(autouse=True, params=["native", "python"])
def hot_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    if request.param == "native":
        if not native.available():
            pytest.skip("the C recorder is not built for this interpreter")
    else:
        monkeypatch.setattr(native, "Recorder", None)
    yield request.param
