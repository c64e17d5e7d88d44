"""A program whose output and exit status must be the same with and without profiling.

Usage: probe.py MODE, MODE in ok | error | exit | interrupt | children.
"""

import asyncio
import multiprocessing
import subprocess
import sys
import threading


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def squares(n):
    for i in range(n):
        yield i * i


async def tick(i):
    await asyncio.sleep(0)
    return i


async def gather():
    return await asyncio.gather(*(tick(i) for i in range(3)))


def in_thread(out):
    out.append(fib(10))


def in_fork_child():
    print("fork child", fib(8), flush=True)


def in_spawn_child():
    print("spawn child", fib(9), flush=True)


def in_forkserver_child():
    print("forkserver child", fib(6), flush=True)


def main(mode):
    print("fib", fib(15))
    print("squares", list(squares(5)))
    print("gather", asyncio.run(gather()))
    out = []
    t = threading.Thread(target=in_thread, args=(out,))
    t.start()
    t.join()
    print("thread", out)
    try:
        {}["missing"]
    except KeyError as exc:
        print("caught", repr(exc))
    sys.stderr.write("to stderr\n")
    if mode == "children":
        sys.stdout.flush()
        subprocess.run([sys.executable, __file__, "subprocess"], check=True)
        for method, target in (
            ("fork", in_fork_child),
            ("spawn", in_spawn_child),
            ("forkserver", in_forkserver_child),
        ):
            p = multiprocessing.get_context(method).Process(target=target)
            p.start()
            p.join()
            print(method, "exit", p.exitcode, flush=True)
    if mode == "error":
        raise ValueError("uncaught")
    if mode == "exit":
        sys.exit(3)
    if mode == "interrupt":
        raise KeyboardInterrupt


def in_subprocess():
    print("subprocess", fib(7))


if __name__ == "__main__":
    if sys.argv[1] == "subprocess":
        in_subprocess()
    else:
        main(sys.argv[1])
