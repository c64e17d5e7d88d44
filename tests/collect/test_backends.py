"""The backend table is the one place that knows each backend."""

from __future__ import annotations

from typing import Any

import pytest

from profkit.api.errors import UnsupportedEventError
from profkit.api.events import EventMask
from profkit.collect import backends, select


def test_every_row_names_a_class_with_the_rows_capabilities() -> None:
    import importlib

    for name, row in backends.TABLE.items():
        module = importlib.import_module(row.module)
        cls = getattr(module, row.cls)
        assert cls.name == name
        assert cls.capabilities == row.capabilities == backends.capabilities(name)


def test_unknown_names_are_refused_with_the_tables_names() -> None:
    why = backends.unavailable("dtrace")
    assert why is not None and "monitoring, evalframe, setprofile, sampler" in why
    assert select.unavailable("dtrace") == why
    assert select.BACKENDS == backends.NAMES == ("monitoring", "evalframe", "setprofile", "sampler")


def test_auto_takes_the_first_tracing_row_that_can_run() -> None:
    choice = select.choose("auto", EventMask.ENTER_LEAVE)
    first = next(
        r
        for r in backends.TABLE.values()
        if r.tracing
        and r.unavailable() is None
        and (r.auto is None or r.auto(EventMask.ENTER_LEAVE) is None)
    )
    assert choice.name == first.name
    if first.name != "monitoring":
        assert choice.reason.startswith("monitoring refused: ")


def test_a_forced_backend_is_checked_against_its_capabilities() -> None:
    with pytest.raises(UnsupportedEventError, match="the sampler backend cannot deliver"):
        select.choose("sampler", EventMask.ENTER_LEAVE | EventMask.SAMPLING)
    assert select.choose("sampler", EventMask.SAMPLING).reason == "forced"


def test_backends_get_the_narrow_context_not_the_session(backend: str) -> None:
    from profkit.collect import attach, detach
    from profkit.collect.context import BackendContext
    from tests.collect.recording import Recorder

    attached = attach(Recorder(EventMask.ENTER_LEAVE), backend)
    try:
        session: Any = attached._session
        parts = [session.backend, *session.extras]
        for part in parts:
            ctx = getattr(part, "ctx", None)
            assert ctx is None or isinstance(ctx, BackendContext)
        ctx = session.backend.ctx
        assert ctx.plan is session.plan and ctx.mask == session.mask and ctx.active
        for lifecycle in ("detach", "start", "profiler", "info", "catalog"):
            assert not hasattr(ctx, lifecycle)
    finally:
        detach()
    assert not ctx.active
