"""The failure rule on its own: reported once, contained, the program's errors left alone."""

from __future__ import annotations

from profkit.collect.failure import FailureRule


def _rule() -> tuple[FailureRule, list[str], list[int]]:
    lines: list[str] = []
    detached: list[int] = []
    rule = FailureRule("pkg.P", lines.append)
    rule.on_failure(lambda: detached.append(1))
    return rule, lines, detached


def test_a_failure_is_reported_once_and_detaches_once() -> None:
    rule, lines, detached = _rule()
    rule.fail(ValueError("boom"), "function_enter")
    rule.fail(KeyError("again"), "function_leave")
    assert lines == ["profkit: profiler pkg.P failed in function_enter: ValueError: boom; detached"]
    assert detached == [1] and rule.failed


def test_a_recursion_error_is_the_programs_except_in_initialize() -> None:
    rule, lines, detached = _rule()
    rule.fail(RecursionError("deep"), "function_enter")
    assert not lines and not detached and not rule.failed
    rule.fail(RecursionError("deep"), "initialize")
    assert lines and detached == [1]


def test_call_contains_exceptions_and_passes_arguments() -> None:
    rule, lines, detached = _rule()
    seen: list[tuple[int, int]] = []
    rule.call("gc", lambda a, b: seen.append((a, b)), 1, 2)
    rule.call("gc", lambda: 1 / 0)
    assert seen == [(1, 2)]
    assert lines == [
        "profkit: profiler pkg.P failed in gc: ZeroDivisionError: division by zero; detached"
    ]
    assert detached == [1]


def test_shutdown_failures_are_reported_but_never_twice() -> None:
    class P:
        def shutdown(self) -> None:
            raise OSError("disk")

    rule, lines, detached = _rule()
    rule.call_at_shutdown(P(), "shutdown")
    rule.call_at_shutdown(P(), "shutdown")
    assert lines == ["profkit: profiler pkg.P failed in shutdown: OSError: disk; detached"]
    assert not detached
