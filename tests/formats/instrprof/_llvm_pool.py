"""The input orders llvm-profdata's ``merge -j N`` thread pool can take, for oracle tests.

LLVM deals input i to writer context ``i % N`` and loads each input under that context's
lock, but the pool's threads race for the locks: on a loaded machine two inputs of one
context can be loaded in either order. When inputs disagree about a record (the first
loaded wins) or LLVM <= 16 orders names by insertion, the bytes differ with the order.
Permuting the inputs inside each residue class of the command line gives exactly those
orders, so a test can re-run profkit (or llvm-profdata) on them.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import TypeVar

T = TypeVar("T")


def pool_orders(count: int, jobs: int, limit: int = 720) -> Iterator[list[int]]:
    """Input orders llvm-profdata's thread pool can produce for ``merge -j jobs``.

    LLVM deals input i to writer context ``i % jobs`` and loads each input under its
    context's lock, but the pool's threads race for those locks: under load, two inputs
    of one context can be loaded in either order. Serial order comes first; ``-j 1``
    has no pool, so it is the only order.
    """
    yield list(range(count))
    if jobs <= 1:
        return
    shares = [list(range(c, count, jobs)) for c in range(jobs)]
    seen = 1
    for perms in itertools.product(*(itertools.permutations(s) for s in shares)):
        order = [0] * count
        for context, perm in enumerate(perms):
            for slot, index in zip(range(context, count, jobs), perm, strict=True):
                order[slot] = index
        if order == list(range(count)):
            continue
        if seen >= limit:
            return
        seen += 1
        yield order


def assert_some_pool_order_matches(
    count: int,
    jobs: int,
    ours_for: Callable[[list[int]], T],
    expected: T,
    comparable: Callable[[T], T] = lambda x: x,
) -> None:
    """LLVM's ``-j`` result equals ours for serial order, or for an order its pool allows.

    Only when two inputs disagree about a record (a count mismatch: the first loaded
    wins), or LLVM <= 16 orders names by insertion, does the order inside a context
    change the output, so the search past the first order runs only when the machine's
    scheduling made LLVM take another order.
    """
    first = comparable(ours_for(list(range(count))))
    if first == expected:
        return
    for order in itertools.islice(pool_orders(count, jobs), 1, None):
        if comparable(ours_for(order)) == expected:
            return
    assert first == expected
