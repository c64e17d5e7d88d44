"""Replaying a log of sampled allocations and frees into the three memory views.

One algorithm for every memory profile (``profkit.heap.build_profile`` from the raw sampler,
the memory profiler from the API's notifications): bytes allocated by key; the moment the
live estimate peaks and what was alive then; what is still alive at the end. Two passes over
the log (the first finds the peak, the second replays up to it) instead of snapshots while
the program runs: the log has one entry per ``mean_bytes`` allocated, so it is short.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)

#: ``(id, weight, key)`` for an allocation, ``(id, None, None)`` for a free.
LogEntry = tuple[int, float | None, K | None]


@dataclass
class Replayed(Generic[K]):
    """What a log says: per key ``[samples, bytes]`` allocated, and the blocks
    (id -> (weight, key)) alive at the peak and at the end."""

    allocated: dict[K, list[float]] = field(default_factory=dict)
    at_peak: dict[int, tuple[float, K]] = field(default_factory=dict)
    leaked: dict[int, tuple[float, K]] = field(default_factory=dict)
    allocated_bytes: float = 0.0
    peak_bytes: float = 0.0


def replay(log: Sequence[LogEntry[K]]) -> Replayed[K]:
    """Replay ``log`` (in the order things happened); a free of an unknown id is ignored."""
    out: Replayed[K] = Replayed()
    live: dict[int, tuple[float, K]] = {}
    live_bytes = 0.0
    peak_at = -1
    for index, (ident, weight, key) in enumerate(log):
        if weight is not None:
            assert key is not None
            row = out.allocated.setdefault(key, [0, 0.0])
            row[0] += 1
            row[1] += weight
            out.allocated_bytes += weight
            live[ident] = (weight, key)
            live_bytes += weight
            if live_bytes > out.peak_bytes:
                out.peak_bytes, peak_at = live_bytes, index
        else:
            gone = live.pop(ident, None)
            if gone is not None:
                live_bytes -= gone[0]
    out.leaked = live
    for ident, weight, key in log[: peak_at + 1]:
        if weight is not None:
            assert key is not None
            out.at_peak[ident] = (weight, key)
        else:
            out.at_peak.pop(ident, None)
    return out
