"""The setprofile fast path, C (``_profhook.Hook``) and Python (``_pyhook.Hook``): the
same constructor, the same tables, the same decisions, checked by the same tests."""

from __future__ import annotations

import contextlib
import gc
import sys
import weakref
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import pytest

from profkit.collect import _pyhook, setprofile
from profkit.collect.setprofile_slow import GEN, PLAIN, REJECTED, RESUME, YIELD

IMPLS: list[Any] = [_pyhook]
if setprofile._profhook is not None:
    IMPLS.insert(0, setprofile._profhook)


@pytest.fixture(params=IMPLS, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def impl(request: pytest.FixtureRequest) -> ModuleType:
    return request.param  # type: ignore[no-any-return]


def pk_leaf(x: int = 0) -> int:
    return x + 1


def pk_gen(n: int) -> Iterator[int]:
    for i in range(n):
        yield pk_leaf(i)


#: 3.13 stops a throw() at the RESUME after the yield, not at the YIELD_VALUE
_AT_RESUME = sys.version_info >= (3, 13)


def pk_catching() -> Iterator[str]:
    while True:
        try:
            yield "ready"
        except KeyError:
            yield "caught"


def _first_resume(code: Any) -> int:
    raw = code.co_code
    return next(i for i in range(0, len(raw), 2) if raw[i] == RESUME)


def _hook(impl: ModuleType, seen: list[tuple[Any, ...]], **over: Any) -> Any:
    def note(kind: str) -> Callable[[int], None]:
        return lambda fid: seen.append((kind, fid))

    args: dict[str, Any] = {
        "status": {},
        "gen_code": {},
        "throwing": {},
        "state": [True],
        "slow": lambda frame, event, arg: seen.append(("slow", frame.f_code.co_name, event)),
        "fail": lambda exc, what: seen.append(("fail", type(exc).__name__, what)),
        "enter": note("enter"),
        "leave": note("leave"),
        "yield_": note("yield"),
        "resume": note("resume"),
        "plain_fast": PLAIN,
        "gen_fast": GEN,
        "transitions": False,
        "resume_op": RESUME,
        "yield_op": YIELD,
    }
    args.update(over)
    return impl.Hook(**args)


def _run(hook: Any, body: Callable[[], object]) -> None:
    old = sys.getprofile()
    sys.setprofile(hook)
    try:
        body()
    finally:
        sys.setprofile(old)


def test_the_constructor_takes_keywords_only(impl: ModuleType) -> None:
    with pytest.raises(TypeError):
        impl.Hook()
    hook = _hook(impl, [])
    assert isinstance(hook.status, dict)


def test_known_plain_functions_take_the_fast_path(impl: ModuleType) -> None:
    seen: list[tuple[Any, ...]] = []
    fid = id(pk_leaf.__code__)
    _run(_hook(impl, seen, status={fid: PLAIN}), lambda: pk_leaf(1))
    assert [e for e in seen if e[0] != "slow"] == [("enter", fid), ("leave", fid)]


def test_rejected_functions_are_silent_and_unknown_ones_go_slow(impl: ModuleType) -> None:
    seen: list[tuple[Any, ...]] = []
    _run(_hook(impl, seen, status={id(pk_leaf.__code__): REJECTED}), lambda: pk_leaf(1))
    assert not [e for e in seen if "pk_leaf" in e]
    seen.clear()
    _run(_hook(impl, seen), lambda: pk_leaf(1))
    assert ("slow", "pk_leaf", "call") in seen and ("slow", "pk_leaf", "return") in seen


def test_generators_enter_yield_resume_and_leave_on_the_fast_path(impl: ModuleType) -> None:
    seen: list[tuple[Any, ...]] = []
    code = pk_gen.__code__
    gid = id(code)
    hook = _hook(
        impl,
        seen,
        status={gid: GEN, id(pk_leaf.__code__): REJECTED},
        gen_code={gid: (code.co_code, _first_resume(code))},
    )
    _run(hook, lambda: list(pk_gen(2)))
    mine = [e for e in seen if e[-1] == gid or "pk_gen" in e]
    assert mine == [
        ("enter", gid),
        ("yield", gid),
        ("resume", gid),
        ("yield", gid),
        ("resume", gid),
        ("leave", gid),
    ]


def test_a_generator_being_thrown_into(impl: ModuleType) -> None:
    seen: list[tuple[Any, ...]] = []
    code = pk_gen.__code__
    gid = id(code)
    gen = pk_gen(3)
    next(gen)
    hook_throwing: dict[int, int] = {}
    hook = _hook(
        impl,
        seen,
        status={gid: GEN},
        gen_code={gid: (code.co_code, _first_resume(code))},
        throwing=hook_throwing,
    )

    def throw() -> None:
        with pytest.raises(KeyError):
            gen.throw(KeyError("x"))

    _run(hook, throw)
    # 3.13 stops a throw() at the RESUME after the yield, 3.11/3.12 at the YIELD_VALUE,
    # where the fast path notes it in ``throwing`` (as the slow path does) to tell, at the
    # return, an unwind (a leave) from a yield; the note goes with the return.
    # 3.13 cannot tell that unwind from a yield (docs/api.md), the others can.
    mine = [e for e in seen if e[-1] == gid or "pk_gen" in e]
    assert mine == [("resume", gid), ("yield" if _AT_RESUME else "leave", gid)]
    assert not hook_throwing


def test_a_closed_generator_leaves_and_a_caught_throw_yields(impl: ModuleType) -> None:
    """close() (any()/all() stopping early) unwinds: a leave; a throw() the generator
    catches and yields after: a yield. Both on the fast path, notes cleared."""
    seen: list[tuple[Any, ...]] = []
    code, cgid = pk_catching.__code__, id(pk_catching.__code__)
    throwing: dict[int, int] = {}
    hook = _hook(
        impl,
        seen,
        status={cgid: GEN, id(pk_leaf.__code__): REJECTED},
        gen_code={cgid: (code.co_code, _first_resume(code))},
        throwing=throwing,
    )
    gen = pk_catching()
    next(gen)

    def body() -> None:
        gen.throw(KeyError("x"))  # caught: yields "caught"
        gen.close()

    _run(hook, body)
    mine = [e for e in seen if e[-1] == cgid or "pk_catching" in e]
    last = "yield" if _AT_RESUME else "leave"
    assert mine == [("resume", cgid), ("yield", cgid), ("resume", cgid), (last, cgid)]
    assert not throwing


def test_a_stopped_hook_and_c_calls_go_to_the_slow_path(impl: ModuleType) -> None:
    seen: list[tuple[Any, ...]] = []
    fid = id(pk_leaf.__code__)
    _run(_hook(impl, seen, status={fid: PLAIN}, transitions=True), lambda: len([]))
    assert any(e[0] == "slow" and e[2] == "c_call" for e in seen)
    seen.clear()
    state = [True]
    hook = _hook(impl, seen, status={fid: PLAIN}, state=state)
    state[0] = False
    _run(hook, lambda: len([]))
    assert any(e[0] == "slow" and e[2] == "c_call" for e in seen)


def test_a_profiler_exception_goes_to_fail_and_not_into_the_program(impl: ModuleType) -> None:
    seen: list[tuple[Any, ...]] = []
    fid = id(pk_leaf.__code__)

    def boom(_fid: int) -> None:
        raise ValueError("profiler bug")

    _run(_hook(impl, seen, status={fid: PLAIN}, enter=boom, leave=boom), lambda: pk_leaf(1))
    assert ("fail", "ValueError", "function_enter") in seen
    assert ("fail", "ValueError", "function_leave") in seen


def test_a_base_exception_goes_to_the_rule_and_what_it_raises_reaches_the_program(
    impl: ModuleType,
) -> None:
    """Both twins hand a KeyboardInterrupt to ``fail`` (the rule decides: contained during
    start-up, the program's afterwards); whatever ``fail`` raises reaches the program."""
    seen: list[tuple[Any, ...]] = []
    fid = id(pk_leaf.__code__)

    def interrupt(_fid: int) -> None:
        raise KeyboardInterrupt

    def body() -> None:
        with pytest.raises(KeyboardInterrupt):
            pk_leaf(1)

    def fail(exc: BaseException, what: str) -> None:
        seen.append(("fail", type(exc).__name__, what))
        raise exc  # the rule once the program runs

    _run(_hook(impl, seen, status={fid: PLAIN}, enter=interrupt, fail=fail), body)
    assert ("fail", "KeyboardInterrupt", "function_enter") in seen


def test_both_report_the_same_events() -> None:
    """One program, both twins over equal tables: equal notifications."""

    def program() -> None:
        for n in range(3):
            list(pk_gen(n))
            pk_leaf(n)

    results = []
    for twin in IMPLS:
        seen: list[tuple[Any, ...]] = []
        code = pk_gen.__code__
        hook = _hook(
            twin,
            seen,
            status={id(code): GEN, id(pk_leaf.__code__): PLAIN},
            gen_code={id(code): (code.co_code, _first_resume(code))},
        )
        _run(hook, program)
        results.append([e for e in seen if e[0] != "slow"])
    assert all(r == results[0] for r in results)


# -- C calls -------------------------------------------------------------------------------


class PkList(list):  # type: ignore[type-arg]
    """A subclass: its instances' methods are named after it (``PkList.append``)."""


def pk_c_caller() -> None:
    len([])
    [].append(1)
    PkList().append(2)
    with contextlib.suppress(KeyError):
        {}.pop(1)  # c_exception


C_CALLS = [
    ("to_native", "len"),
    ("to_python", "len"),
    ("to_native", "list.append"),
    ("to_python", "list.append"),
    ("to_native", "PkList.append"),
    ("to_python", "PkList.append"),
    ("to_native", "dict.pop"),
    ("to_python", "dict.pop"),
]


def _c_hook(impl: ModuleType, seen: list[tuple[Any, ...]], **over: Any) -> Any:
    """A hook whose C-call events reach ``to_native``/``to_python`` (noted by name), with
    ids from a ``native_id`` that notes what it was asked."""
    ids: dict[str, int] = {}

    def native_id(func: Any) -> int:
        seen.append(("native_id", func.__qualname__))
        return ids.setdefault(func.__qualname__, 2 * len(ids) + 1)

    def name(fid: int) -> str:
        return next(n for n, i in ids.items() if i == fid)

    args: dict[str, Any] = {
        "transitions": True,
        "to_native": lambda fid: seen.append(("to_native", name(fid))),
        "to_python": lambda fid: seen.append(("to_python", name(fid))),
        "native_id": native_id,
    }
    args.update(over)
    return _hook(impl, seen, **args)


def _transitions(seen: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return [e for e in seen if e[0] in ("to_native", "to_python")]


def test_c_calls_of_a_known_caller_take_the_fast_path(impl: ModuleType) -> None:
    seen: list[tuple[Any, ...]] = []
    status = {id(pk_c_caller.__code__): PLAIN}
    _run(_c_hook(impl, seen, status=status), pk_c_caller)
    assert _transitions(seen) == C_CALLS
    assert not [e for e in seen if e[0] == "slow" and e[1] == "pk_c_caller"]


def test_c_calls_of_a_rejected_caller_are_silent_and_an_unknown_one_goes_slow(
    impl: ModuleType,
) -> None:
    seen: list[tuple[Any, ...]] = []
    status = {id(pk_c_caller.__code__): REJECTED}
    _run(_c_hook(impl, seen, status=status), pk_c_caller)
    assert not _transitions(seen) and not [e for e in seen if "pk_c_caller" in e]
    seen.clear()
    _run(_c_hook(impl, seen), pk_c_caller)
    assert not _transitions(seen)
    assert ("slow", "pk_c_caller", "c_call") in seen
    assert ("slow", "pk_c_caller", "c_exception") in seen


def test_only_the_wanted_side_of_a_c_call_is_delivered(impl: ModuleType) -> None:
    seen: list[tuple[Any, ...]] = []
    status = {id(pk_c_caller.__code__): PLAIN}
    _run(_c_hook(impl, seen, status=status, to_native=None), pk_c_caller)
    assert _transitions(seen) == [e for e in C_CALLS if e[0] == "to_python"]


def test_a_failing_native_id_goes_to_fail_and_not_into_the_program(impl: ModuleType) -> None:
    seen: list[tuple[Any, ...]] = []

    def native_id(func: Any) -> int:
        raise ValueError("profiler bug")

    status = {id(pk_c_caller.__code__): PLAIN}
    _run(_c_hook(impl, seen, status=status, native_id=native_id), pk_c_caller)
    assert ("fail", "ValueError", "code transition") in seen
    assert not _transitions(seen)


def test_the_c_hook_asks_native_id_once_per_c_function() -> None:
    """Bound methods are new objects per call; the cache is keyed by what names them."""
    if setprofile._profhook is None:
        pytest.skip("the C dispatcher is not built here")
    seen: list[tuple[Any, ...]] = []
    status = {id(pk_c_caller.__code__): PLAIN}
    hook = _c_hook(setprofile._profhook, seen, status=status)
    _run(hook, lambda: [pk_c_caller() for _ in range(3)])
    asked = [e[1] for e in seen if e[0] == "native_id"]
    assert sorted(asked) == sorted(["len", "list.append", "PkList.append", "dict.pop"])
    assert _transitions(seen) == C_CALLS * 3


def test_both_report_the_same_c_calls() -> None:
    results = []
    for twin in IMPLS:
        seen: list[tuple[Any, ...]] = []
        _run(_c_hook(twin, seen, status={id(pk_c_caller.__code__): PLAIN}), pk_c_caller)
        results.append(_transitions(seen))
    assert all(r == results[0] for r in results)


def pk_quiet_callee() -> None:
    sorted([2, 1])


def pk_loud_caller() -> None:
    len([])
    pk_quiet_callee()
    abs(-1)  # after a rejected callee returned: the caller is the loud one again


def test_c_calls_are_charged_to_the_code_that_made_them(impl: ModuleType) -> None:
    """The C hook remembers the last caller's verdict; a return must not leave it stale."""
    seen: list[tuple[Any, ...]] = []
    status = {id(pk_loud_caller.__code__): PLAIN, id(pk_quiet_callee.__code__): REJECTED}
    _run(_c_hook(impl, seen, status=status), lambda: [pk_loud_caller() for _ in range(2)])
    assert (
        _transitions(seen)
        == [
            ("to_native", "len"),
            ("to_python", "len"),
            ("to_native", "abs"),
            ("to_python", "abs"),
        ]
        * 2
    )


def test_the_c_hook_keeps_no_class_alive(impl: ModuleType) -> None:
    """A class whose instances' C methods were called dies when the program drops it."""

    def short_lived() -> Any:
        class PkShortLived(list):  # type: ignore[type-arg]
            pass

        return PkShortLived

    def pk_c_caller_of(cls: Any) -> None:
        cls().append(1)

    seen: list[tuple[Any, ...]] = []
    status = {id(pk_c_caller_of.__code__): PLAIN}
    hook = _c_hook(impl, seen, status=status)
    box = [short_lived()]
    ref = weakref.ref(box[0])
    _run(hook, lambda: pk_c_caller_of(box[0]))
    assert [(k, n.rsplit("<locals>.", 1)[-1]) for k, n in _transitions(seen)] == [
        ("to_native", "PkShortLived.append"),
        ("to_python", "PkShortLived.append"),
    ]
    box.clear()
    gc.collect()
    assert ref() is None
    seen.clear()
    _run(hook, lambda: pk_c_caller_of(short_lived()))  # maybe at the dead one's address
    assert [(k, n.rsplit("<locals>.", 1)[-1]) for k, n in _transitions(seen)] == [
        ("to_native", "PkShortLived.append"),
        ("to_python", "PkShortLived.append"),
    ]
    del hook
