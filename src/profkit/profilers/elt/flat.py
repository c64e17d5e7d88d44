"""Call trees over the C recorder's flat export, whose nodes are made only when read.

Why lazy: a long run's tree has one node per distinct call path (sympy: ~90,000), and
making a :class:`~profkit.calltree.model.CallNode` for each cost more than the C
recorder's whole run. The end of ``profkit run`` reads few of them — the saver writes
the rows as they are (:mod:`profkit.calltree.stream_writer`), the end-of-run tree
descends only into hot nodes — so a node's children are made on first access, from the
rows :meth:`Recorder.export_flat` returned (pre-order, each with its subtree size, so a
node's children are found by skipping over their subtrees).

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

#: Columns of a row: parent, frame, calls, inclusive, exclusive, min, max, subtree size.
COLS = 8
_PARENT, _FRAME, _EXCL, _SIZE = 0, 1, 4, 7
#: The frame column (a row's frame index in the profile; -1 for the root).
COLS_FRAME = _FRAME
#: Rows per piece of saved JSON text (about 1 MB).
JSON_ROWS = 32768
#: The base class's ``children`` slot, which the property below fills on first access.
_CHILDREN: Any = CallNode.__dict__["children"]
_new = object.__new__


class FlatRows:
    """One thread's exported rows (native int64), shared by every node of its tree."""

    __slots__ = ("data", "pristine", "values")

    def __init__(self, data: bytes | bytearray) -> None:
        if len(data) % (COLS * 8):
            raise ValueError("flat rows: not whole rows")
        self.data = data
        self.values = memoryview(data).cast("q")
        #: True until a node below the root was made (a reader might then change it)
        self.pristine = True

    def __len__(self) -> int:
        return len(self.values) // COLS


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
        v = rows.values
        return v[_PARENT::COLS], v[_FRAME::COLS], v[_EXCL::COLS]

    def _make_children(self) -> dict[int, CallNode]:
        rows = self._rows
        rows.pristine = False
        v = rows.values
        at = self._at
        end = at + v[at * COLS + _SIZE]
        children: dict[int, CallNode] = {}
        j = at + 1
        while j < end:
            child = _node(rows, j)
            children[child.frame] = child
            j += v[j * COLS + _SIZE]
        _CHILDREN.__set__(self, children)
        return children


def _node(rows: FlatRows, at: int) -> LazyCallNode:
    b = at * COLS
    v = rows.values
    node: LazyCallNode = _new(LazyCallNode)
    node.frame = v[b + 1]
    node.calls = v[b + 2]
    node.inclusive_ns = v[b + 3]
    node.exclusive_ns = v[b + 4]
    node.min_ns = v[b + 5]
    node.max_ns = v[b + 6]
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
    count = len(data) // (COLS * 8)
    for start in range(0, count, JSON_ROWS):
        text = rows_json(data, start, start + JSON_ROWS)
        yield b"," + text if start else text


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
