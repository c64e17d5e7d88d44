"""The recorder's side of the ``__profkit_idcall__`` protocol (``src/profkit/_idcall.h``):
its id-shaped methods as C functions, which the setprofile backend's C dispatcher calls
instead of the methods. Same trees either way, and the same failure rule."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from profkit.profilers.elt import native

pytestmark = pytest.mark.skipif(not native.available(), reason="the C recorder is not built")
_profhook = pytest.importorskip("profkit.collect._profhook")

from profkit.collect.setprofile_slow import GEN, PLAIN, RESUME, YIELD  # noqa: E402

CAPSULE = "profkit._idcall.v1"


@pytest.fixture(autouse=True)
def hot_path() -> str:
    """These tests pick their paths themselves (overrides the conftest's both-ways run)."""
    return "native"


def pk_leaf(x: int = 0) -> int:
    return x + 1


def pk_outer(n: int) -> int:
    return sum(pk_leaf(i) for i in range(n)) + len(str(n))


def _recorder(**kwargs: Any) -> Any:
    assert native.Recorder is not None
    return native.Recorder(lambda: ("t", "T"), **kwargs)


def test_the_four_callbacks_are_offered_and_nothing_else() -> None:
    rec = _recorder()
    for name in ("enter", "resume", "leave", "yield_"):
        form = rec.__profkit_idcall__(name)
        assert type(form).__name__ == "PyCapsule" and repr(form).count(CAPSULE) == 1
    assert rec.__profkit_idcall__("py_start") is None
    assert rec.__profkit_idcall__("export") is None
    with pytest.raises(TypeError):
        rec.__profkit_idcall__(b"enter")


def _hook(callbacks: dict[str, Any], status: dict[int, int], fails: list[Any]) -> Any:
    return _profhook.Hook(
        status=status,
        gen_code={},
        throwing={},
        state=[True],
        slow=lambda frame, event, arg: None,
        fail=lambda exc, what: fails.append((type(exc).__name__, what)),
        plain_fast=PLAIN,
        gen_fast=GEN,
        resume_op=RESUME,
        yield_op=YIELD,
        **{"transitions": False, **callbacks},
    )


def _wrapped(method: Any) -> Any:
    return lambda fid: method(fid)


def _tree(wrap: bool) -> Any:
    """pk_outer and pk_leaf recorded through the C dispatcher: with the recorder's
    methods themselves (their C forms), or wrapped in lambdas (no offer: called)."""
    clock = iter(range(0, 10**9, 7))
    rec = _recorder(clock=lambda: next(clock))
    names = {"enter": rec.enter, "leave": rec.leave, "yield_": rec.yield_, "resume": rec.resume}
    if wrap:
        names = {k: _wrapped(f) for k, f in names.items()}
    status = {id(pk_outer.__code__): PLAIN, id(pk_leaf.__code__): PLAIN}
    fails: list[Any] = []
    hook = _hook(names, status, fails)
    old = sys.getprofile()
    sys.setprofile(hook)
    try:
        pk_outer(5)
    finally:
        sys.setprofile(old)
    assert not fails
    return rec.export(10**9)[1][0][1]


def test_the_c_forms_record_what_the_methods_record() -> None:
    direct, called = _tree(wrap=False), _tree(wrap=True)
    fids = {row[1] for row in direct}
    assert {id(pk_outer.__code__), id(pk_leaf.__code__)} <= fids
    # same shape and counts; times differ only by the lambdas' clock-free calls
    assert [(p, f, calls) for p, f, calls, *_ in direct] == [
        (p, f, calls) for p, f, calls, *_ in called
    ]


def test_an_error_in_the_c_form_goes_to_the_failure_rule() -> None:
    def clock() -> int:
        raise ValueError("clock broken")

    rec = _recorder(clock=clock)
    fails: list[Any] = []
    callbacks = {"enter": rec.enter, "leave": rec.leave, "yield_": None, "resume": None}
    hook = _hook(callbacks, {id(pk_leaf.__code__): PLAIN}, fails)
    old = sys.getprofile()
    sys.setprofile(hook)
    try:
        assert pk_leaf(1) == 2  # the program goes on
    finally:
        sys.setprofile(old)
    assert ("ValueError", "function_enter") in fails
    assert ("ValueError", "function_leave") in fails


def test_c_calls_reach_the_c_forms_with_the_cached_id() -> None:
    """c_call/c_return of a known caller: to_native/to_python's C forms get native_id's
    answer, asked once per C function and then cached (here: len, called three times)."""
    clock = iter(range(0, 10**9, 7))
    rec = _recorder(clock=lambda: next(clock))
    asked: list[Any] = []

    def native_id(func: Any) -> int:
        asked.append(func.__name__)
        return 1001

    fails: list[Any] = []
    callbacks = {
        "enter": rec.enter,
        "leave": rec.leave,
        "yield_": None,
        "resume": None,
        "transitions": True,
        "to_native": rec.enter,
        "to_python": rec.leave,
        "native_id": native_id,
    }
    hook = _hook(callbacks, {id(pk_lens.__code__): PLAIN}, fails)
    old = sys.getprofile()
    sys.setprofile(hook)
    try:
        pk_lens()
    finally:
        sys.setprofile(old)
    assert not fails and asked == ["len"]
    rows = rec.export(10**9)[1][0][1]
    (caller,) = [i for i, row in enumerate(rows) if row[1] == id(pk_lens.__code__)]
    assert [(row[1], row[2]) for row in rows if row[0] == caller] == [(1001, 3)]


def pk_lens() -> int:
    return len("a") + len("bb") + len("ccc")


def pk_mixed() -> int:
    """C calls of every kind the dispatcher's shortcuts meet: a plain one (its c_return
    the next event), one calling back into Python (events between), one raising (a
    c_exception) and nested ones (``len(str(n))``)."""
    n = len("ab")
    n += sum(sorted([3, 1, 2], key=pk_leaf))
    try:
        divmod(1, 0)
    except ZeroDivisionError:
        n += 1
    return n + len(str(n)) + len(str(n))


def _c_tree(wrap: bool) -> Any:
    """pk_mixed recorded with C calls as nodes: through the recorder's C forms, or its
    methods wrapped in lambdas (no offer: the dispatcher's general path)."""
    clock = iter(range(0, 10**9, 7))
    rec = _recorder(clock=lambda: next(clock))
    ids = {"len": 1001, "sorted": 1003, "sum": 1005, "divmod": 1007, "str": 1009}
    names: dict[str, Any] = {"enter": rec.enter, "leave": rec.leave}
    if wrap:
        names = {k: _wrapped(f) for k, f in names.items()}
    callbacks = {
        **names,
        "yield_": None,
        "resume": None,
        "transitions": True,
        "to_native": names["enter"],
        "to_python": names["leave"],
        "native_id": lambda func: ids.get(func.__name__, 1011),
    }
    fails: list[Any] = []
    status = {id(pk_mixed.__code__): PLAIN, id(pk_leaf.__code__): PLAIN}
    hook = _hook(callbacks, status, fails)
    old = sys.getprofile()
    sys.setprofile(hook)
    try:
        pk_mixed()
    finally:
        sys.setprofile(old)
    assert not fails
    return [(p, f, calls) for p, f, calls, *_ in rec.export(10**9)[1][0][1]]


def test_c_calls_through_the_c_forms_record_what_the_methods_record() -> None:
    """The dispatcher's C-call shortcuts (a c_return right after its c_call reuses that
    c_call's id) record the tree its general path records."""
    direct, called = _c_tree(wrap=False), _c_tree(wrap=True)
    assert direct == called
    fids = [f for _, f, _ in direct]
    assert {1001, 1003, 1005, 1007, id(pk_leaf.__code__)} <= set(fids)
    (sorted_row,) = [i for i, (_, f, _) in enumerate(direct) if f == 1003]
    assert [(f, calls) for p, f, calls in direct if p == sorted_row] == [(id(pk_leaf.__code__), 3)]
