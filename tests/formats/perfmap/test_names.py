"""The lazily decoded name column behaves like the list of names it stands for."""

from __future__ import annotations

import numpy as np

from profkit.formats.perfmap._names import NameColumn, as_list
from profkit.formats.perfmap.perfpid import read_perf_map


def test_behaves_like_a_list() -> None:
    data = b"7f00 10 alpha\n7f10 10 beta gamma\n7f20 10 caf\xc3\xa9 \xff\n"
    names = read_perf_map(data).names
    want = ["alpha", "beta gamma", "café \udcff"]
    assert isinstance(names, NameColumn)
    assert names == want and want == names and names == tuple(want)
    assert names != ["alpha"] and names != "alpha"
    assert len(names) == 3 and names[1] == "beta gamma" and names[-1] == want[-1]
    assert list(names[1:]) == want[1:] and isinstance(names[1:], NameColumn)
    assert as_list(names) == want and as_list(want) is want
    assert "beta gamma" in names
    assert "NameColumn(['alpha'" in repr(names)


def test_ascii_column() -> None:
    data = b"abcdef"
    col = NameColumn(data, np.array([0, 2]), np.array([2, 6]), ascii_only=True)
    assert col == ["ab", "cdef"] and col[0] == "ab"
