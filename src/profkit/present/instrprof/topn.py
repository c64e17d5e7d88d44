"""``show --topn`` selection, in the two orders llvm-profdata has used for equal counts."""

from __future__ import annotations

import heapq


class TopN:
    """The ``--topn`` selection: the N largest function maxima, ties in reader order.

    Verified against LLVM 22 on raw and indexed inputs: equal counts print in the
    order the functions were read. Among equal counts the latest one is evicted first.
    """

    def __init__(self, n: int) -> None:
        self.n = n
        self.seq = 0
        self.heap: list[tuple[int, int, str]] = []

    def offer(self, name: str, fmax: int) -> None:
        self.seq += 1
        if len(self.heap) < self.n:
            heapq.heappush(self.heap, (fmax, -self.seq, name))
        elif self.heap[0][0] < fmax:
            heapq.heapreplace(self.heap, (fmax, -self.seq, name))

    def ordered(self) -> list[tuple[int, str]]:
        return [(m, name) for m, _, name in sorted(self.heap, key=lambda t: (-t[0], -t[1]))]


class StdHeapTopN:
    """LLVM <= 19: ``std::priority_queue`` with ``v1.second > v2.second`` (libstdc++).

    Ties come out in whatever order libstdc++'s heap leaves them, so its moves
    (``__push_heap`` / ``__adjust_heap``) are reproduced step by step.
    """

    def __init__(self, n: int) -> None:
        self.n = n
        self.heap: list[tuple[str, int]] = []

    def _up(self, hole: int, top: int, value: tuple[str, int]) -> None:
        h = self.heap
        parent = (hole - 1) // 2
        while hole > top and h[parent][1] > value[1]:
            h[hole] = h[parent]
            hole = parent
            parent = (hole - 1) // 2
        h[hole] = value

    def _push(self, item: tuple[str, int]) -> None:
        self.heap.append(item)
        self._up(len(self.heap) - 1, 0, item)

    def _pop(self) -> tuple[str, int]:
        h = self.heap
        first = h[0]
        if len(h) > 1:
            value = h[-1]
            h[-1] = first
            length = len(h) - 1
            hole = child = 0
            while child < (length - 1) // 2:
                child = 2 * (child + 1)
                if h[child][1] > h[child - 1][1]:
                    child -= 1
                h[hole] = h[child]
                hole = child
            if length % 2 == 0 and child == (length - 2) // 2:
                child = 2 * (child + 1)
                h[hole] = h[child - 1]
                hole = child - 1
            self._up(hole, 0, value)
        h.pop()
        return first

    def offer(self, name: str, fmax: int) -> None:
        if len(self.heap) == self.n:
            if self.heap[0][1] < fmax:
                self._pop()
                self._push((name, fmax))
        else:
            self._push((name, fmax))

    def ordered(self) -> list[tuple[int, str]]:
        popped = []
        while self.heap:
            popped.append(self._pop())
        return [(m, name) for name, m in reversed(popped)]
