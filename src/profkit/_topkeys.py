"""What ``profkit top``'s keys do and how its header explains them, for Python and .NET.

Why a module of its own: the Python top (:mod:`profkit.sampler.top`) and the .NET one
(:mod:`profkit.dotnet.commands`) are separate engines that may not import each other, and
a user switching between them should find the same keys and the same words (issue #25
item 15: the .NET top had none). The libraries only say what a key does to the state
(:func:`press`); the CLI reads the keys and draws.
"""

from __future__ import annotations

from typing import Protocol

#: The sortable columns, keys 1 to 4 as in py-spy top.
COLUMNS = ("%Own", "%Total", "OwnTime", "TotalTime")
LEGEND = (
    "%Own/%Total: share of the last refresh's time in the function itself / on the stack; "
    "OwnTime/TotalTime: the same since the start"
)
KEYS = "keys: 1-4 sort  p pause  q quit"


class KeyState(Protocol):
    """The part of a top's state its keys change."""

    sort: int  #: the column the rows are sorted by (an index of :data:`COLUMNS`)
    paused: bool  #: the screen stays as it was; sampling goes on
    quit: bool


def press(state: KeyState, key: str) -> bool:
    """Apply one key to ``state``; whether the screen must be drawn again."""
    if key in ("q", "Q"):
        state.quit = True
        return False
    if key in ("p", "P", " "):
        state.paused = not state.paused
        return True
    if key in "1234" and len(key) == 1:
        state.sort = int(key) - 1
        return True
    return False


def status(state: KeyState) -> str:
    """The header's line of keys, the column sorted by, and whether the view is paused."""
    return f"{KEYS}  [sorted by {COLUMNS[state.sort]}]" + ("  [paused]" if state.paused else "")
