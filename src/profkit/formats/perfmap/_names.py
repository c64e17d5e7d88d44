"""A lazily decoded column of names: the file's bytes plus (start, end) per entry.

Building one Python ``str`` per line is most of the cost of loading a big map (500k
names ≈ 50 MB of small objects), and ``lookup``/``symbolize`` need only the names they
hit. So the vectorized reader hands out this ``Sequence[str]``: indexing decodes one
name (UTF-8, ``surrogateescape``, same as the eager path), iteration decodes them all.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import overload

import numpy as np


class NameColumn(Sequence[str]):
    """Names ``data[lo[i]:hi[i]]``, decoded on access; compares equal to a list of str."""

    __slots__ = ("_ascii", "_data", "_hi", "_lo")

    def __init__(self, data: bytes, lo: np.ndarray, hi: np.ndarray, *, ascii_only: bool) -> None:
        self._data = data
        self._lo = lo
        self._hi = hi
        self._ascii = ascii_only

    def __len__(self) -> int:
        return len(self._lo)

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> NameColumn: ...

    def __getitem__(self, index: int | slice) -> str | NameColumn:
        if isinstance(index, slice):
            return NameColumn(self._data, self._lo[index], self._hi[index], ascii_only=self._ascii)
        lo, hi = self._lo.item(index), self._hi.item(index)
        raw = self._data[lo:hi]
        return raw.decode("ascii") if self._ascii else raw.decode("utf-8", "surrogateescape")

    def to_list(self) -> list[str]:
        """Decode every name (one pass; what iteration uses)."""
        data = self._data
        pairs = zip(self._lo.tolist(), self._hi.tolist(), strict=True)
        if self._ascii:
            text = data.decode("ascii")
            return [text[a:b] for a, b in pairs]
        return [data[a:b].decode("utf-8", "surrogateescape") for a, b in pairs]

    def __iter__(self) -> Iterator[str]:
        return iter(self.to_list())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, NameColumn | list | tuple):
            return len(self) == len(other) and self.to_list() == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable-like sequence semantics, as list

    def __repr__(self) -> str:
        head = ", ".join(repr(n) for n in self[:3])
        return f"NameColumn([{head}{', ...' if len(self) > 3 else ''}], n={len(self)})"


def as_list(names: Sequence[str]) -> list[str]:
    """A real list (decoding a :class:`NameColumn` in one pass)."""
    if isinstance(names, NameColumn):
        return names.to_list()
    return names if isinstance(names, list) else list(names)
