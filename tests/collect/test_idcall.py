"""The C dispatcher's side of the ``__profkit_idcall__`` protocol (``_idcall.h``).

A callback that is a bound builtin method of an owner with ``__profkit_idcall__`` is
asked once, when the hook is built, for a C form; an answer that is not the protocol's
capsule leaves the method to be called as usual, and a failing offer fails the hook's
construction (a profiler bug shows at attach, not as lost events). The recorder's side,
and the two together, are tested in ``tests/profilers/elt/test_idcall.py``.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest

from profkit.collect.setprofile_slow import GEN, PLAIN, RESUME, YIELD

_profhook = pytest.importorskip("profkit.collect._profhook")


def pk_leaf(x: int = 0) -> int:
    return x + 1


class Offers(list):  # type: ignore[type-arg]
    """A list whose ``append`` (a bound builtin method) comes with an offer."""

    def __init__(self, answer: Any) -> None:
        super().__init__()
        self.answer = answer
        self.asked: list[str] = []

    def __profkit_idcall__(self, name: str) -> Any:
        self.asked.append(name)
        if isinstance(self.answer, BaseException):
            raise self.answer
        return self.answer


def _hook(enter: Any, leave: Any, fails: list[Any]) -> Any:
    return _profhook.Hook(
        status={id(pk_leaf.__code__): PLAIN},
        gen_code={},
        throwing={},
        state=[True],
        slow=lambda frame, event, arg: None,
        fail=lambda exc, what: fails.append((type(exc).__name__, what)),
        enter=enter,
        leave=leave,
        yield_=None,
        resume=None,
        plain_fast=PLAIN,
        gen_fast=GEN,
        transitions=False,
        resume_op=RESUME,
        yield_op=YIELD,
    )


def _run(hook: Any) -> None:
    old = sys.getprofile()
    sys.setprofile(hook)
    try:
        pk_leaf(1)
    finally:
        sys.setprofile(old)


@pytest.mark.parametrize("answer", [None, "not a capsule", b"x"])
def test_an_answer_that_is_not_the_capsule_keeps_the_method(answer: Any) -> None:
    owner, fails = Offers(answer), []
    _run(_hook(owner.append, owner.append, fails))
    assert owner.asked == ["append", "append"]
    assert owner == [id(pk_leaf.__code__)] * 2 and not fails


def test_a_capsule_of_another_name_keeps_the_method() -> None:
    import datetime

    foreign = datetime.datetime_CAPI  # a capsule, but not the protocol's
    owner, fails = Offers(foreign), []
    _run(_hook(owner.append, None, fails))
    assert owner == [id(pk_leaf.__code__)] and not fails


def test_a_failing_offer_fails_the_hook() -> None:
    owner = Offers(RuntimeError("offer broken"))
    with pytest.raises(RuntimeError, match="offer broken"):
        _hook(owner.append, None, [])


def test_owners_without_an_offer_and_python_callables_are_called() -> None:
    plain: list[int] = []
    seen: list[int] = []
    fails: list[Any] = []
    _run(_hook(plain.append, seen.append, fails))  # a list has no offer: AttributeError
    assert plain == seen == [id(pk_leaf.__code__)] and not fails
