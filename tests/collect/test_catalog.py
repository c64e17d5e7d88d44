"""The catalog on its own: ids, first executions, the filter's verdicts, the frame walk."""

from __future__ import annotations

import sys
from typing import Any

from profkit.api import ProfilerCallback
from profkit.api.events import EventMask
from profkit.api.info import FunctionInfo
from profkit.collect.catalog import Catalog
from profkit.collect.failure import FailureRule


class _P(ProfilerCallback):
    def function_enter(self, function_id: Any) -> None:
        pass


def pk_leaf(x: int = 0) -> int:
    return x + 1


def _catalog() -> tuple[Catalog, list[str], list[int]]:
    lines: list[str] = []
    rule = FailureRule("t.P", lines.append)
    firsts: list[int] = []
    catalog = Catalog(_P(), rule)
    catalog.first_execution = firsts.append
    return catalog, lines, firsts


def test_discover_issues_one_id_and_one_first_execution() -> None:
    catalog, _, firsts = _catalog()
    code = pk_leaf.__code__
    assert catalog.discover(code) == (id(code), True)
    assert catalog.discover(code) == (id(code), True)
    assert firsts == [id(code)]
    assert catalog.functions.info(id(code)).name == "pk_leaf"  # type: ignore[arg-type]


def test_own_code_is_never_accepted_nor_announced() -> None:
    catalog, _, firsts = _catalog()
    own = Catalog.discover.__code__
    assert catalog.discover(own) == (id(own), False)
    assert catalog.discover(_P.function_enter.__code__)[1] is False  # the profiler's own
    assert firsts == []


def test_the_filter_decides_once_and_a_new_filter_asks_again() -> None:
    catalog, _, _ = _catalog()
    asked: list[str] = []

    def accept(info: FunctionInfo) -> bool:
        asked.append(info.name)
        return False

    catalog.set_filter(accept)
    code = pk_leaf.__code__
    assert catalog.discover(code)[1] is False
    assert catalog.discover(code)[1] is False
    catalog.set_filter(lambda info: True)
    assert catalog.discover(code)[1] is True
    assert asked == ["pk_leaf"]


def test_per_function_events_override_the_filter() -> None:
    catalog, _, _ = _catalog()
    code = pk_leaf.__code__
    fid, _ = catalog.discover(code)
    catalog.set_filter(lambda info: False)
    catalog.set_function_events(fid, EventMask.ENTER_LEAVE)
    assert catalog.discover(code)[1] is True
    catalog.set_function_events(fid, EventMask.NONE)
    assert catalog.discover(code)[1] is False


def test_a_failing_filter_is_reported_once_and_rejects() -> None:
    catalog, lines, _ = _catalog()
    catalog.set_filter(lambda info: 1 / 0)  # type: ignore[arg-type,return-value]
    assert catalog.discover(pk_leaf.__code__)[1] is False
    assert lines and "failed in function filter: ZeroDivisionError" in lines[0]


def test_frames_to_ids_walks_outermost_first() -> None:
    catalog, _, _ = _catalog()
    here = sys._getframe()
    ids = catalog.frames_to_ids(here, accepted_only=True)
    assert ids[-1] == id(here.f_code)
    names = [catalog.functions.info(f).name for f in ids]
    assert names[-1] == "test_frames_to_ids_walks_outermost_first"
    pre = {id(here): id(here.f_code)}
    assert catalog.shadow_stack(here, pre)[-1:] != (id(here.f_code),)
