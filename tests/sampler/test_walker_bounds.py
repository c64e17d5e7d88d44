"""The C walker's bounds arithmetic on pointers and sizes near 2**64 (issue #22, item 1).

The audit's SIGSEGV: a frame pointer near 2**64 passed ``frame + span <= end`` (the sum
wraps to a small number) and the walker copied from far outside its chunk's buffer. Each
case runs in a child interpreter so that a crash is reported as this test's failure with
its signal, not as a lost pytest worker. Memory is built in that child (``process_vm_readv``
reads its own address space), as in test_walker.py.
"""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import textwrap
from types import SimpleNamespace

import pytest

from profkit.sampler.memory import Memory
from profkit.sampler.pywalk import CUT_CYCLE, CUT_DEPTH, CUT_NONE, LoopCheck, PyWalker

pytest.importorskip("profkit.sampler._walker", reason="the C walker is not built")

TOP = 1 << 64

#: A child's set-up: a 4 KiB data-stack chunk at ``base`` (previous 0, size 4096) holding
#: one frame at ``base + 64`` whose ``previous`` is ``PREV`` (the walk's second frame).
_CHILD = """
import ctypes, os, struct, sys
from profkit.sampler import _walker as walker
PARAMS = (72, 0, 8, 56, 70, 0, 8, 4096, 1 << 20)
buf = ctypes.create_string_buffer(4096)
base = ctypes.addressof(buf)
struct.pack_into("<QQ", buf, 0, 0, 4096)
struct.pack_into("<QQ", buf, 64, 0x1000, PREV)
struct.pack_into("<Q", buf, 64 + 56, 0x1200)
"""


def _run_child(prev: int, body: str) -> str:
    code = _CHILD.replace("PREV", str(prev)) + textwrap.dedent(body)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"status {proc.returncode}: {proc.stderr[-2000:]}"
    return proc.stdout.strip()


@pytest.mark.parametrize("prev", [TOP - 8, TOP - 1, TOP - 71, TOP - 72, TOP - 4096])
def test_a_previous_frame_near_2_64_is_an_error_not_a_wild_copy(prev):
    out = _run_child(
        prev,
        """
        try:
            pairs, torn, cut = walker.walk(os.getpid(), base + 64, base, PARAMS)
        except OSError as exc:
            print("oserror", exc.errno)
        else:
            print("pairs", len(pairs))
        """,
    )
    assert out.startswith("oserror")  # the frame at ``prev`` cannot be read: EFAULT


@pytest.mark.parametrize("prev", [TOP - 8, TOP - 64])
def test_a_thread_whose_frame_chain_runs_to_2_64_is_left_out(prev):
    # The same chain from sample(): the thread's walk fails with EFAULT, so it is counted
    # torn and left out; the sample itself answers.
    out = _run_child(
        prev,
        """
        ts = ctypes.create_string_buffer(256)
        at = ctypes.addressof(ts)
        runtime, interp, tstate = at, at + 64, at + 128
        struct.pack_into("<Q", ts, 0, interp)
        struct.pack_into("<QQ", ts, 64, 0, tstate)
        struct.pack_into("<QQQQQQ", ts, 128, 0, 0, 77, 4242, base, base + 64)
        no = (1 << 64) - 1
        tparams = (0, 0, 8, 48, 8, 16, 24, 32, 40, 40, no, 0, 0, 0, 0, 0, 50, 2)
        threads, torn, retries, cut = walker.sample(os.getpid(), runtime, False, tparams, PARAMS)
        print(len(threads), torn)
        """,
    )
    assert out == "0 1"


def test_an_older_chunk_whose_size_wraps_is_not_trusted():
    # The frame's previous lies in an "older chunk" whose size makes ``chunk + size`` wrap
    # past 2**64: the old check then said the frame near 2**64 was inside it.
    out = _run_child(
        TOP - 8,
        """
        old = ctypes.create_string_buffer(64)
        struct.pack_into("<QQ", old, 0, 0, (1 << 64) - ctypes.addressof(old) + 256)
        struct.pack_into("<Q", buf, 0, ctypes.addressof(old))  # the chunk's previous
        try:
            walker.walk(os.getpid(), base + 64, base, PARAMS)
        except OSError as exc:
            print("oserror", exc.errno)
        """,
    )
    assert out.startswith("oserror")


@pytest.mark.parametrize(
    "params",
    [
        (72, TOP - 4, 8, 56, 70, 0, 8, 4096, 1 << 20),  # code offset + 8 wraps to 4
        (72, 0, TOP - 1, 56, 70, 0, 8, 4096, 1 << 20),
        (72, 0, 8, 56, TOP - 1, 0, 8, 4096, 1 << 20),
        (72, 0, 8, 56, 70, TOP - 8, 8, 4096, 1 << 20),
        (72, 0, 8, 56, 70, 0, TOP - 2, 4096, 1 << 20),
        (72, 0, 8, 56, 70, 0, 8, 4096, TOP - 1),  # a chunk budget that ``used +`` wraps
        (4, 0, 8, 56, 70, 0, 8, 4096, 1 << 20),  # a span too small for its fields
    ],
)
def test_offsets_whose_sums_wrap_are_refused(params):
    out = _run_child(
        0,
        f"""
        try:
            walker.walk(os.getpid(), base + 64, base, {params!r})
        except ValueError:
            print("refused")
        """,
    )
    assert out == "refused"


def test_thread_offsets_whose_sums_wrap_are_refused():
    out = _run_child(
        0,
        """
        no = (1 << 64) - 1
        for bad in range(3, 10):  # the thread state's own fields (read from its copy)
            tparams = [0, 0, 8, 48, 8, 16, 24, 32, 40, 40, no, 0, 0, 0, 0, 0, 50, 2]
            tparams[bad] = (1 << 64) - 4
            try:
                walker.sample(os.getpid(), base, False, tuple(tparams), PARAMS)
            except ValueError:
                continue
            print("accepted", bad)
        print("done")
        """,
    )
    assert out == "done"


# --- the Python twin (pywalk) on the same kind of memory: Python ints do not wrap, but
# --- it must answer the same way (a ReadFault, a cycle found and said).


def _layout() -> SimpleNamespace:
    return SimpleNamespace(
        frame_span=72,
        frame_code=0,
        frame_previous=8,
        frame_instr=56,
        frame_owner=70,
        chunk_previous=0,
        chunk_size=8,
    )


def _chain(buf: bytearray, base: int, links: list[int]) -> None:
    for i, previous in enumerate(links):
        struct.pack_into("<QQ", buf, 64 + i * 72, 0x1000 * (i + 1), previous)


def test_pywalk_finds_a_cycle_and_a_depth_cut():
    import ctypes

    buf = ctypes.create_string_buffer(4096)
    base = ctypes.addressof(buf)
    struct.pack_into("<QQ", buf, 0, 0, 4096)
    a, b, c = base + 64, base + 64 + 72, base + 64 + 144
    for i, previous in enumerate((b, c, b)):  # a -> b -> c -> b -> ...
        struct.pack_into("<QQ", buf, 64 + i * 72, 0x1000 * (i + 1), previous)
    walker = PyWalker(Memory(os.getpid()), _layout(), 4096, 1 << 20)  # type: ignore[arg-type]
    walk = walker.walk(a, base)
    assert walk.cut == CUT_CYCLE and 3 <= len(walk.addrs) <= 6
    walk = PyWalker(Memory(os.getpid()), _layout(), 2, 1 << 20).walk(a, base)  # type: ignore[arg-type]
    assert walk.cut == CUT_DEPTH and len(walk.addrs) == 2
    struct.pack_into("<Q", buf, 64 + 144 + 8, 0)  # c ends the chain
    assert PyWalker(Memory(os.getpid()), _layout(), 4096, 1 << 20).walk(a, base).cut == CUT_NONE  # type: ignore[arg-type]


def test_loop_check_finds_every_cycle_within_three_times_its_length_plus_its_tail():
    for tail in range(6):
        for length in range(1, 40):
            sequence = list(range(tail)) + [
                tail + (i % length) for i in range(10 * (tail + length))
            ]
            loop = LoopCheck(sequence[0])
            steps = next(i for i, x in enumerate(sequence[1:], 1) if loop.seen(x))
            assert steps <= 3 * (tail + length)
