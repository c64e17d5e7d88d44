from collections.abc import Callable
from types import CodeType
from typing import Any

#: why this interpreter cannot run it (3.12+), or None (3.11)
UNAVAILABLE: str | None

class EvalHook:
    def __init__(
        self,
        *,
        state: list[bool],
        classify: Callable[[CodeType], tuple[int, int]],
        fail: Callable[[BaseException, str], None],
        enter: Callable[[int], Any] | None,
        leave: Callable[[int], Any] | None,
        yield_: Callable[[int], Any] | None,
        resume: Callable[[int], Any] | None,
        yield_op: int,
    ) -> None: ...

def conflict() -> str | None: ...
def install(hook: EvalHook) -> str | None: ...
def uninstall(hook: EvalHook) -> None: ...
def resume_after_fork(hook: EvalHook) -> None: ...
