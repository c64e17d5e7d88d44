"""build_profile on hand-made event streams: allocated, peak and leaked by stack."""

from __future__ import annotations

from types import CodeType

from hypothesis import given
from hypothesis import strategies as st

from profkit.heap import Allocation, Free, build_profile


def _code(name: str) -> CodeType:
    return compile(f"def {name}(): pass", "<t>", "exec").co_consts[0]  # type: ignore[no-any-return]


A, B = _code("a"), _code("b")


def name(code: CodeType, line: int) -> str:
    return code.co_name


def test_peak_is_the_highest_live_total_and_its_stacks() -> None:
    events = [
        Allocation(1, 10, 100.0, 0, ((A, 1),)),
        Allocation(2, 10, 300.0, 0, ((B, 1), (A, 2))),
        Free(1),
        Allocation(3, 10, 50.0, 0, ((A, 1),)),
        Free(2),
    ]
    prof = build_profile(events, name)
    assert prof.allocated == {("a",): 150.0, ("a", "b"): 300.0}
    assert prof.peak_bytes == 400.0
    assert prof.peak == {("a",): 100.0, ("a", "b"): 300.0}
    assert prof.leaked == {("a",): 50.0}
    assert prof.by_function("alloc") == {"a": 150.0, "b": 300.0}


@given(
    st.lists(
        st.tuples(st.booleans(), st.integers(1, 5), st.floats(1, 1e6), st.booleans()),
        max_size=60,
    )
)
def test_totals_add_up(ops: list[tuple[bool, int, float, bool]]) -> None:
    events: list[Allocation | Free] = []
    live: list[int] = []
    for n, (free, _size, weight, which) in enumerate(ops):
        if free and live:
            events.append(Free(live.pop(0)))
        else:
            events.append(Allocation(n, 8, weight, 0, ((A if which else B, 1),)))
            live.append(n)
    prof = build_profile(events, name)
    assert abs(sum(prof.allocated.values()) - prof.allocated_bytes) <= 1e-6 * (
        1 + prof.allocated_bytes
    )
    assert abs(sum(prof.leaked.values()) - prof.leaked_bytes) <= 1e-6 * (1 + prof.leaked_bytes)
    assert abs(sum(prof.peak.values()) - prof.peak_bytes) <= 1e-6 * (1 + prof.peak_bytes)
    assert prof.peak_bytes + 1e-6 >= prof.leaked_bytes
