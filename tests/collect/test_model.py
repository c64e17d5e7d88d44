"""Enter/leave/yield/resume against an oracle: the program logs what a profiler must see.

Hypothesis draws a nested plan; fixed functions walk it (plain calls, generators drained
by ``list``, exceptions raised and caught one level up, re-raised through a frame), and
each function appends to ``LOG`` (a C ``list.append``: no Python frame of its own) exactly
the notifications profkit must deliver, in order. The recorder's events for those
functions must equal the log on every backend.
"""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from profkit.api import EventMask
from profkit.collect import attach, detach
from profkit.collect.select import unavailable
from tests.collect.recording import Recorder

BACKENDS = [b for b in ("monitoring", "setprofile") if unavailable(b) is None]

LOG: list[tuple[str, str]] = []
log = LOG.append
NAMES = {"walk", "gen", "thrower", "passthrough"}


class Boom(Exception):
    pass


def walk(plan: list[Any]) -> None:
    log(("enter", "walk"))
    try:
        for step in plan:
            if isinstance(step, list):
                walk(step)
            elif step == 0:
                list(gen(2))
            elif step == 1:
                with contextlib.suppress(Boom):
                    thrower()
            elif step == 2:
                with contextlib.suppress(Boom):
                    passthrough()
    finally:
        log(("leave", "walk"))


def gen(n: int):  # type: ignore[no-untyped-def]
    log(("enter", "gen"))
    try:
        for i in range(n):
            log(("yield", "gen"))
            yield i
            log(("resume", "gen"))
    finally:
        log(("leave", "gen"))


def thrower() -> None:
    log(("enter", "thrower"))
    log(("leave", "thrower"))  # logged before the raise: the unwind is its leave
    raise Boom


def passthrough() -> None:
    log(("enter", "passthrough"))
    try:
        thrower()
    finally:
        log(("leave", "passthrough"))


plans = st.recursive(
    st.lists(st.integers(0, 2), max_size=4),
    lambda inner: st.lists(st.one_of(st.integers(0, 2), inner), max_size=4),
    max_leaves=12,
)


def check(backend: str, plan: list[Any], mask: EventMask) -> None:
    LOG.clear()
    rec = Recorder(mask)
    attach(rec, backend)
    try:
        walk(plan)
    finally:
        detach()
    expected: list[tuple[str, str]] = []
    for kind, name in LOG:
        if mask & EventMask.EXCEPTIONS and kind == "leave" and name in ("thrower", "passthrough"):
            expected.append(("unwind", name))  # both always leave by an exception
        expected.append((kind, name))
    assert [e[:2] for e in rec.calls(NAMES)] == expected


@pytest.mark.parametrize(
    "mask", [EventMask.ENTER_LEAVE, EventMask.ENTER_LEAVE | EventMask.EXCEPTIONS]
)
@pytest.mark.parametrize("backend_name", BACKENDS)
@settings(max_examples=25, deadline=None)
@given(plan=plans)
def test_matches_the_programs_own_log(backend_name: str, mask: EventMask, plan: list[Any]) -> None:
    check(backend_name, plan, mask)
