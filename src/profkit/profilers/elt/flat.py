"""Call trees over the C recorder's flat export, whose nodes are made only when read.

Why lazy: a long run's tree has one node per distinct call path (sympy: ~90,000), and
making a :class:`~profkit.calltree.model.CallNode` for each cost more than the C
recorder's whole run. The end of ``profkit run`` reads few of them — the saver writes
the rows as they are (:mod:`profkit.calltree.stream_writer`), the end-of-run tree
descends only into hot nodes — so a node's children are made on first access, from the
rows :meth:`Recorder.export_flat` returned (pre-order, each with its subtree size, so a
node's children are found by skipping over their subtrees). The rows are stored column by
column (``csrc/flatrows.h``): two int64 columns, then six 32-bit ones, 40 bytes a row
where 8 int64s took 64 — at the end of a long run they are the largest thing the process
holds. A row's calls, shortest and longest call are 32-bit, as in the recorder's nodes;
the rare row whose numbers do not fit (a call of 4.29 s or more) keeps them, as int64s,
in the wide rows after the columns.

A :class:`LazyCallNode` is a ``CallNode`` in every way that matters to readers
(``isinstance``, equality, ``children``, ``walk``); a tree whose nodes were never read is
*pristine*, and only then may a saver trust the rows over the nodes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from profkit.calltree.model import CallNode

TYPE_CHECKING = False  # typing's, without importing typing at run time (profkit run's start-up)
if TYPE_CHECKING:
    from typing import Any

#: The int64 columns, in their order in the buffer after its header (times in ns).
WIDE = ("incl", "excl")
#: The uint32 columns after them: calls, the shortest and the longest call (ns), each
#: :data:`WIDE_ROW` in ``calls`` when the row's three are in the wide rows instead.
STATS = ("calls", "min", "max")
#: The int32 columns after those: the parent's row (-1 for the root), the frame index in
#: the profile (-1 for the root), the row's subtree size (itself included).
NARROW = ("parent", "frame", "size")
#: The wide rows' int64 columns, last: the row (ascending) and its calls, min, max.
WIDE_ROWS = ("row", "calls", "min", "max")
#: ``calls`` of a row whose numbers are in the wide rows (the recorder's ``WIDE``).
WIDE_ROW = 2**32 - 1
#: Bytes of one row, of the header (the row count, the wide row count), of one wide row.
ROW_BYTES = 8 * len(WIDE) + 4 * len(STATS) + 4 * len(NARROW)
HEADER_BYTES = 16
WIDE_ROW_BYTES = 8 * len(WIDE_ROWS)
#: A row as :func:`pack` takes it and :func:`unpack` gives it (the saved file's order).
ROW = ("parent", "frame", "calls", "incl", "excl", "min", "max", "size")
#: Rows per piece of saved JSON text (~350 KB: 1 MB pieces, each copied to put a comma
#: before it, were ~3 MB of the save's peak on test_arit's 1.2 M rows; issue #26).
JSON_ROWS = 8192
#: The base class's ``children`` slot, which the property below fills on first access.
_CHILDREN: Any = CallNode.__dict__["children"]
_new = object.__new__


def counts(data: bytes | bytearray) -> tuple[int, int]:
    """(rows, wide rows) of ``data``, checked against its length."""
    if len(data) >= HEADER_BYTES:
        count, wide = memoryview(data)[:HEADER_BYTES].cast("q").tolist()
        if min(count, wide) >= 0 and len(data) == _size(count, wide):
            return count, wide
    raise ValueError("flat rows: not whole rows")


def _size(count: int, wide: int) -> int:
    return HEADER_BYTES + ROW_BYTES * count + WIDE_ROW_BYTES * wide


def column(data: bytes | bytearray, name: str) -> memoryview:
    """Column ``name`` (of :data:`WIDE`, :data:`STATS` or :data:`NARROW`) of the rows in
    ``data``, as a view (writable when ``data`` is): one value a row. A :data:`STATS`
    column is the rows' raw 32-bit one (see :func:`values` for every row's number)."""
    count, _ = counts(data)
    start = HEADER_BYTES
    if name in WIDE:
        start += 8 * count * WIDE.index(name)
        return memoryview(data)[start : start + 8 * count].cast("q")
    start += 8 * count * len(WIDE)
    if name in STATS:
        start += 4 * count * STATS.index(name)
        return memoryview(data)[start : start + 4 * count].cast("I")
    start += 4 * count * (len(STATS) + NARROW.index(name))
    return memoryview(data)[start : start + 4 * count].cast("i")


def wide_column(data: bytes | bytearray, name: str) -> memoryview:
    """Column ``name`` of :data:`WIDE_ROWS` of the rows in ``data``: one value a wide row."""
    count, wide = counts(data)
    start = HEADER_BYTES + ROW_BYTES * count + 8 * wide * WIDE_ROWS.index(name)
    return memoryview(data)[start : start + 8 * wide].cast("q")


def values(data: bytes | bytearray, name: str) -> list[int]:
    """Every row's ``name`` (any column but the subtree size's order: :data:`ROW`), the wide
    rows' numbers in their places."""
    out = column(data, name).tolist()
    if name in STATS:
        for row, number in zip(wide_column(data, "row"), wide_column(data, name), strict=True):
            out[row] = number
    return out


def pack(rows: list[tuple[int, ...]]) -> bytearray:
    """Rows given as :data:`ROW` tuples, in export_flat's layout (tests, hand-made rows):
    a row whose calls, min or max does not fit 32 bits (or whose calls is
    :data:`WIDE_ROW`) goes to the wide rows, as the export puts it."""
    from array import array

    stats = [ROW.index(name) for name in STATS]
    wide = [
        at
        for at, row in enumerate(rows)
        if row[stats[0]] == WIDE_ROW or not all(0 <= row[k] < 2**32 for k in stats)
    ]
    out = bytearray(array("q", [len(rows), len(wide)]).tobytes())
    for name in (*WIDE, *STATS, *NARROW):
        k = ROW.index(name)
        if name in STATS:
            column = [row[k] for row in rows]
            for at in wide:
                column[at] = WIDE_ROW if name == "calls" else 0
            out += array("I", column).tobytes()
        else:
            out += array("q" if name in WIDE else "i", [row[k] for row in rows]).tobytes()
    out += array("q", wide).tobytes()
    for k in stats:
        out += array("q", [rows[at][k] for at in wide]).tobytes()
    return out


def unpack(data: bytes | bytearray) -> list[tuple[int, ...]]:
    """export_flat's rows as :data:`ROW` tuples."""
    columns = [values(data, name) for name in ROW]
    return list(zip(*columns, strict=True))


def interleaved(data: bytes | bytearray, names: tuple[str, ...]) -> list[int]:
    """Columns ``names`` of every row, row after row (a small tree's rows for a reader that
    wants them so: the calibration's)."""
    columns = [values(data, name) for name in names]
    return [value for row in zip(*columns, strict=True) for value in row]


class FlatRows:
    """One thread's exported rows, shared by every node of its tree: the buffer and a view
    of each column."""

    __slots__ = (
        "calls",
        "data",
        "excl",
        "frame",
        "incl",
        "max",
        "min",
        "parent",
        "pristine",
        "size",
        "wide",
    )

    def __init__(self, data: bytes | bytearray) -> None:
        self.data = data
        self.parent = column(data, "parent")
        self.frame = column(data, "frame")
        self.size = column(data, "size")
        self.calls = column(data, "calls")
        self.incl = column(data, "incl")
        self.excl = column(data, "excl")
        self.min = column(data, "min")
        self.max = column(data, "max")
        self.wide: dict[int, tuple[int, int, int]] | None = None
        #: True until a node below the root was made (a reader might then change it)
        self.pristine = True

    def __len__(self) -> int:
        return len(self.size)

    def wide_row(self, at: int) -> tuple[int, int, int]:
        """(calls, min, max) of row ``at``, one of the wide rows (a call of 4.29 s or
        more): a dict of them made on the first ask (they are few)."""
        if self.wide is None:
            numbers = [wide_column(self.data, name) for name in WIDE_ROWS]
            self.wide = {row: (calls, lo, hi) for row, calls, lo, hi in zip(*numbers, strict=True)}
        return self.wide[at]


class LazyCallNode(CallNode):
    """A ``CallNode`` whose ``children`` are made from its :class:`FlatRows` when read."""

    __slots__ = ("_at", "_rows")
    _at: int
    _rows: FlatRows

    @property
    def children(self) -> dict[int, CallNode]:
        try:
            return _CHILDREN.__get__(self, CallNode)
        except AttributeError:
            return self._make_children()

    @children.setter
    def children(self, value: dict[int, CallNode]) -> None:
        _CHILDREN.__set__(self, value)

    def flat_json(self) -> Iterator[bytes] | None:
        """This whole tree's ``nodes`` array content as the saved file stores it, in pieces
        of :data:`JSON_ROWS` rows, while no node of it was made (see
        :mod:`profkit.calltree.stream_writer`); else None. Pieces, not one text: a large
        tree's text (~32 bytes a row) would be the save's peak memory."""
        rows = pristine_rows(self)
        if rows is None or native_rows_json() is None:
            return None
        return _json_pieces(rows.data)

    def flat_columns(self) -> tuple[memoryview, memoryview, memoryview] | None:
        """(parents, frames, self times) of every row of this whole tree, pre-order, while
        no node of it was made (so the rows still say what the tree says); else None.
        Lets a whole-tree pass (the report's hot spots) run without making a node."""
        rows = pristine_rows(self)
        if rows is None:
            return None
        return rows.parent, rows.frame, rows.excl

    def flat_sums(self) -> Callable[..., dict[int, int] | None] | None:
        """The C ``frame_sums`` (``csrc/rowsums.c``: a column's sums by frame, in one pass
        over the rows) for :meth:`flat_columns`' columns, answering None where it refuses
        them (a frame below 0, a sum past int64), while the columns say what the tree says
        and the extension is built; else None (the readers' Python loops then)."""
        from profkit.profilers.elt.native import frame_sums

        if pristine_rows(self) is None or frame_sums is None:
            return None

        def sums(*columns: Any) -> dict[int, int] | None:
            try:
                return frame_sums(*columns)
            except (ValueError, OverflowError):
                return None

        return sums

    def _make_children(self) -> dict[int, CallNode]:
        rows = self._rows
        rows.pristine = False
        size = rows.size
        at = self._at
        end = at + size[at]
        children: dict[int, CallNode] = {}
        j = at + 1
        while j < end:
            child = _node(rows, j)
            children[child.frame] = child
            j += size[j]
        _CHILDREN.__set__(self, children)
        return children


def _node(rows: FlatRows, at: int) -> LazyCallNode:
    node: LazyCallNode = _new(LazyCallNode)
    node.frame = rows.frame[at]
    calls = rows.calls[at]
    if calls == WIDE_ROW:
        node.calls, node.min_ns, node.max_ns = rows.wide_row(at)
    else:
        node.calls = calls
        node.min_ns = rows.min[at]
        node.max_ns = rows.max[at]
    node.inclusive_ns = rows.incl[at]
    node.exclusive_ns = rows.excl[at]
    node._rows = rows
    node._at = at
    return node


def tree(data: bytes | bytearray) -> LazyCallNode:
    """The root of one thread's tree over ``data`` (export_flat's rows)."""
    return _node(FlatRows(data), 0)


def native_rows_json() -> Callable[..., bytes] | None:
    """The C ``rows_json`` (None when the extension is not built)."""
    from profkit.profilers.elt.native import rows_json

    return rows_json


def _json_pieces(data: bytes | bytearray) -> Iterator[bytes]:
    rows_json = native_rows_json()
    assert rows_json is not None
    count, _ = counts(data)
    for start in range(0, count, JSON_ROWS):
        if start:
            yield b","  # apart: ``b"," + text`` would copy the piece
        yield rows_json(data, start, start + JSON_ROWS)


def pristine_rows(root: CallNode) -> FlatRows | None:
    """The rows behind ``root`` when no node of its tree was made since (so they still
    say what the tree says), else None."""
    rows: FlatRows | None = getattr(root, "_rows", None)
    if rows is not None and getattr(root, "_at", -1) == 0 and rows.pristine:
        try:
            _CHILDREN.__get__(root, CallNode)
        except AttributeError:
            return rows
    return None
