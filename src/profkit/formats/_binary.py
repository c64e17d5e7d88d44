"""A bounds-checked cursor over bytes, shared by the binary readers.

Every read states what it is reading, so an error can say *what* was cut short and
*where*; every count read from a file can be checked against the bytes that remain
(:meth:`Cursor.check_count`) before anything is allocated or looped over.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from functools import lru_cache

from profkit.errors import FormatError

ErrorFactory = Callable[..., FormatError]


@lru_cache(maxsize=256)
def compiled(fmt: str) -> struct.Struct:
    """Compile a struct format once; layouts are looked up on every record."""
    return struct.Struct(fmt)


class Cursor:
    """Reads from ``data`` starting at ``pos``; never reads past ``end``.

    ``error`` builds the exception to raise (a :class:`FormatError` subclass), so the
    same cursor serves every format family with its own error type.
    """

    __slots__ = ("data", "end", "error", "path", "pos")

    def __init__(
        self,
        data: bytes | memoryview,
        pos: int = 0,
        end: int | None = None,
        *,
        path: str | None = None,
        error: type[FormatError] = FormatError,
    ) -> None:
        self.data = data
        self.pos = pos
        self.end = len(data) if end is None else end
        self.path = path
        self.error = error

    @property
    def remaining(self) -> int:
        return self.end - self.pos

    def fail(self, kind: str, detail: str, offset: int | None = None) -> FormatError:
        """Build (not raise) an error at ``offset`` (default: the current position)."""
        return self.error(
            kind,  # type: ignore[arg-type]
            detail,
            path=self.path,
            offset=self.pos if offset is None else offset,
        )

    def need(self, size: int, what: str) -> None:
        """Fail with ``truncated`` unless ``size`` bytes remain."""
        if size < 0:
            raise self.fail("malformed", f"{what}: negative size {size}")
        if size > self.end - self.pos:
            raise self.fail(
                "truncated", f"{what} needs {size} bytes, {max(self.end - self.pos, 0)} remain"
            )

    def check_count(self, count: int, item_size: int, what: str) -> None:
        """Fail with ``too_large`` unless ``count`` items of ``item_size`` bytes could fit.

        Called on every count taken from a file before it drives an allocation or loop.
        """
        if count < 0:
            raise self.fail("malformed", f"{what}: negative count {count}")
        if item_size and count * item_size > self.end - self.pos:
            raise self.fail(
                "too_large",
                f"{what}: {count} × {item_size} bytes declared, "
                f"only {max(self.end - self.pos, 0)} remain",
            )

    def take(self, size: int, what: str) -> memoryview:
        """Return the next ``size`` bytes (a view, no copy) and advance."""
        self.need(size, what)
        start = self.pos
        self.pos += size
        return memoryview(self.data)[start : start + size]

    def skip(self, size: int, what: str) -> None:
        self.need(size, what)
        self.pos += size

    def unpack(self, fmt: str, what: str) -> tuple[int, ...]:
        """Unpack one struct of format ``fmt`` (endianness included in ``fmt``)."""
        st = compiled(fmt)
        self.need(st.size, what)
        values = st.unpack_from(self.data, self.pos)
        self.pos += st.size
        return values

    def u8(self, what: str) -> int:
        return self.unpack("<B", what)[0]

    def u32(self, what: str, order: str = "<") -> int:
        return self.unpack(order + "I", what)[0]

    def u64(self, what: str, order: str = "<") -> int:
        return self.unpack(order + "Q", what)[0]

    def align(self, alignment: int, what: str) -> None:
        """Skip padding up to the next multiple of ``alignment`` (relative to offset 0)."""
        pad = (-self.pos) % alignment
        if pad:
            self.skip(pad, what)

    def sub(self, size: int, what: str) -> Cursor:
        """A cursor over the next ``size`` bytes (same offsets), advancing this one past them."""
        self.need(size, what)
        child = Cursor(self.data, self.pos, self.pos + size, path=self.path, error=self.error)
        self.pos += size
        return child
