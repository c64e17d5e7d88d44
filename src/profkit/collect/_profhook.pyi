from collections.abc import Callable
from types import FrameType
from typing import Any

class Hook:
    """The setprofile backend's fast path in C; callable as a Python profile function."""

    status: dict[int, int]
    def __init__(
        self,
        *,
        status: dict[int, int],
        gen_code: dict[int, tuple[bytes, int]],
        throwing: dict[int, int],
        state: list[bool],
        slow: Callable[[FrameType, str, Any], None],
        fail: Callable[[BaseException, str], None],
        enter: Callable[[int], object] | None,
        leave: Callable[[int], object] | None,
        yield_: Callable[[int], object] | None,
        resume: Callable[[int], object] | None,
        plain_fast: int,
        gen_fast: int,
        transitions: bool,
        resume_op: int,
        yield_op: int,
        to_native: Callable[[int], object] | None = None,
        to_python: Callable[[int], object] | None = None,
        native_id: Callable[[Any], int] | None = None,
    ) -> None: ...
    def __call__(self, frame: FrameType, event: str, arg: Any, /) -> None: ...
    def resume_after_fork(self) -> None: ...
