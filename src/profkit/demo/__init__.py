"""A small program to try profkit on: ``profkit run -m profkit.demo``.

It does a little of everything a call-tree profiler must get right, in about a second:
nested calls and recursion, a generator consumed by a loop, ``asyncio`` coroutines that
sleep (time a coroutine spends suspended is not its own), a worker thread with its own
tree, and an exception raised deep down and caught higher up. Every function lives in
``profkit.demo``, so ``--prefix profkit.demo`` keeps exactly the demo's code.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator


class Inventory:
    """Many small method calls: the call-dense code tracing profilers find hardest."""

    def __init__(self) -> None:
        self.items: dict[str, int] = {}

    def add(self, name: str, count: int) -> None:
        self.items[name] = self.items.get(name, 0) + count

    def total(self) -> int:
        return sum(self.items.values())


def fib(n: int) -> int:
    """Recursion: one node per depth in the call tree."""
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def primes() -> Iterator[int]:
    """A generator: each resumption is one activation under the loop that consumes it."""
    found: list[int] = []
    candidate = 2
    while True:
        if all(candidate % p for p in found if p * p <= candidate):
            found.append(candidate)
            yield candidate
        candidate += 1


def first_primes(count: int) -> list[int]:
    gen = primes()
    return [next(gen) for _ in range(count)]


def parse(text: str) -> int:
    """Raises for bad input; the caller catches it (an exception unwinding through a frame)."""
    return int(text)


def parse_all(texts: list[str]) -> int:
    good = 0
    for text in texts:
        try:
            parse(text)
            good += 1
        except ValueError:
            pass
    return good


def stock_up(rounds: int) -> int:
    inventory = Inventory()
    for i in range(rounds):
        inventory.add(f"item{i % 50}", i)
    return inventory.total()


async def fetch(delay: float) -> int:
    """Awaits a sleep: suspended time is not charged to this coroutine."""
    await asyncio.sleep(delay)
    return fib(14)


async def gather_all() -> int:
    results = await asyncio.gather(fetch(0.05), fetch(0.1), fetch(0.15))
    return sum(results)


def background(results: list[int]) -> None:
    """Runs on its own thread: gets its own call tree."""
    results.append(fib(20))


def main() -> int:
    results: list[int] = []
    worker = threading.Thread(target=background, args=(results,), name="demo-worker")
    worker.start()
    total = fib(20)
    total += sum(first_primes(1500))
    total += parse_all(["1", "2", "x", "3", "oops"] * 200)
    total += stock_up(20_000)
    total += asyncio.run(gather_all())
    worker.join()
    total += results[0]
    print(f"profkit demo: done (checksum {total})")
    return 0
