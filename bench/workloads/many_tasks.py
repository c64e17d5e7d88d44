"""An asyncio program with many short tasks: the real-program load of bench/udp_real.py.

Every task sleeps once (a trip through the event loop) and awaits two small coroutines,
so the profiler sees a stream of short calls from the event loop's machinery and the
program's own code, ~123 event lines a task under ``profkit run``.
"""

import asyncio
import sys


def key(i: int) -> int:
    return (i * 2654435761) % 1000


async def leaf(i: int) -> int:
    return key(i) + 1


async def middle(i: int) -> int:
    return await leaf(i) + await leaf(i + 1)


async def task(i: int) -> int:
    await asyncio.sleep(0)
    return await middle(i)


async def main(n: int) -> None:
    total = 0
    for start in range(0, n, 1000):
        results = await asyncio.gather(*(task(i) for i in range(start, min(start + 1000, n))))
        total += sum(results)
    print(total)


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 20000))
