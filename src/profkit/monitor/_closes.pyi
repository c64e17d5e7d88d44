from array import array
from collections.abc import Callable

def feed(
    body: str,
    heads: dict[str, tuple[int, list[int] | None]],
    sums: list[int],
    head: Callable[[str], tuple[int, list[int] | None]],
    duration: Callable[[str], int],
    last: array[int],
    pending: dict[int, list[int]],
    /,
) -> int | None:
    """FunctionTable.feed's per-line loop in C; None when ``body`` is not ASCII."""
