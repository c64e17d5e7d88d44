"""The live top-N of the hottest functions, from ``Leave``/``Yield`` durations.

Bounded: at most :data:`MAX_FUNCTIONS` names are tracked. When the table is full, the
cooler half is forgotten (a standard heavy-hitters compromise): a function that is hot
now re-enters at once, and the hottest ones are never the ones dropped. Names are kept as
they arrive and only formatted when shown.
"""

from __future__ import annotations

import heapq
import re

MAX_FUNCTIONS = 20_000

#: ``    Leave: NAME, Duration: 12.250 us`` (also ``Yield``; units ns, us, µs, ms, s)
CLOSE_LINE = re.compile(
    r"^ *(?:Leave|Yield): (.+), Duration: ([0-9]{1,15}(?:\.[0-9]{1,9})?) (ns|us|µs|ms|s)$",
    re.MULTILINE,
)
_SCALE = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000}


class FunctionTable:
    """name → [total ns, closes, longest ns]; see the module docstring for the bound."""

    def __init__(self, limit: int = MAX_FUNCTIONS) -> None:
        self.limit = limit
        self.table: dict[str, list[int]] = {}
        self.forgotten = 0  #: names evicted so far

    def feed(self, body: str) -> int:
        """Add every close line of a datagram body; return how many there were."""
        table = self.table
        found = CLOSE_LINE.findall(body)
        for name, value, unit in found:
            ns = int(value) * _SCALE[unit] if "." not in value else round(float(value) * _SCALE[unit])
            entry = table.get(name)
            if entry is None:
                if len(table) >= self.limit:
                    self._shrink()
                table[name] = [ns, 1, ns]
            else:
                entry[0] += ns
                entry[1] += 1
                if ns > entry[2]:
                    entry[2] = ns
        return len(found)

    def _shrink(self) -> None:
        keep = heapq.nlargest(self.limit // 2, self.table.items(), key=lambda kv: kv[1][0])
        self.forgotten += len(self.table) - len(keep)
        self.table.clear()  # in place: feed() holds a reference to this dict
        self.table.update(keep)

    def top(self, n: int) -> list[tuple[str, int, int, int]]:
        """The ``n`` functions with the most total time: (name, total, count, longest)."""
        best = heapq.nlargest(max(n, 0), self.table.items(), key=lambda kv: kv[1][0])
        return [(name, e[0], e[1], e[2]) for name, e in best]
