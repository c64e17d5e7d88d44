"""``perfmap show``'s statistics (``summary.entry_stats``)."""

from __future__ import annotations

import numpy as np

from profkit.formats.perfmap.summary import entry_stats

U64_MAX = (1 << 64) - 1


def _stats(entries: list[tuple[int, int, str]]) -> dict[str, object]:
    starts = np.array([e[0] for e in entries], dtype=np.uint64)
    sizes = np.array([e[1] for e in entries], dtype=np.uint64)
    return entry_stats(starts, sizes, [e[2] for e in entries])


def test_plain_map() -> None:
    st = _stats([(0x2000, 0x10, "b"), (0x1000, 0x20, "a"), (0x1010, 0x8, "in")])
    assert (st["entries"], st["lowest"], st["highest_end"]) == (3, 0x1000, 0x2010)
    assert (st["size_min"], st["size_max"], st["size_total"]) == (8, 0x20, 0x38)
    assert (st["overlapping_neighbours"], st["duplicate_starts"]) == (1, 0)
    assert st["names_shorter_than_3"] == 3


def test_ranges_past_2_64_saturate_instead_of_wrapping() -> None:
    """An entry reaching past 2**64 wrapped: its end came out tiny, the highest end was
    another entry's and the overlap it makes was not counted; the size total wrapped."""
    st = _stats(
        [
            (U64_MAX - 0xF, 0x100, "wraps"),
            (0x1000, 0x10, "normal"),
            (U64_MAX - 0xF, U64_MAX, "huge"),
        ]
    )
    assert st["highest_end"] == U64_MAX
    assert st["overlapping_neighbours"] == 1
    assert st["size_total"] == 0x100 + 0x10 + U64_MAX
