"""``profkit dump`` of a target whose lists loop (issue #22, item 7): the audit's target had
a thread list and frame chains that were cycles, and dump printed 16.7 M lines (4096 threads
of 4096 frames). Walks now find the cycle in a few elements and the text says where a walk
was cut. The memory is built in this process, as in test_walker.py."""

from __future__ import annotations

import ctypes
import os
import struct

import pytest

from profkit.calltree.model import Frame
from profkit.sampler.codes import CodeInfo
from profkit.sampler.dumping import Dump, format_dump
from profkit.sampler.pywalk import CUT_CYCLE, CUT_DEPTH, CUT_NONE
from profkit.sampler.reader import (
    CUT_INTERPS_CYCLE,
    CUT_THREADS_CYCLE,
    CUT_THREADS_DEPTH,
    ThreadStack,
)

walker = pytest.importorskip("profkit.sampler._walker", reason="the C walker is not built")

PARAMS = (72, 0, 8, 56, 70, 0, 8, 4096, 1 << 20)
NO = (1 << 64) - 1
THREAD_PARAMS = (0, 0, 8, 48, 8, 16, 24, 32, 40, 40, NO, 0, 0, 0, 0, 0, 4096, 2)


def test_a_target_of_cycles_gives_a_few_threads_of_a_few_frames():
    # runtime -> interp (whose next is itself) -> tstates a -> b -> a; each thread's
    # current frame starts a chain f0 -> f1 -> f2 -> f1 -> ...
    buf = ctypes.create_string_buffer(4096)
    base = ctypes.addressof(buf)
    runtime, interp, ta, tb, frames = base, base + 64, base + 128, base + 192, base + 256
    struct.pack_into("<Q", buf, 0, interp)
    struct.pack_into("<QQ", buf, 64, interp, ta)
    struct.pack_into("<QQQQQQ", buf, 128, 0, tb, 1, 101, 0, frames)
    struct.pack_into("<QQQQQQ", buf, 192, 0, ta, 2, 102, 0, frames)
    for i, previous in enumerate((1, 2, 1)):
        at = 256 + i * 72
        struct.pack_into("<QQ", buf, at, 0x1000 * (i + 1), frames + previous * 72)
    threads, torn, _retries, lists_cut = walker.sample(
        os.getpid(), runtime, False, THREAD_PARAMS, PARAMS
    )
    assert torn == 0
    assert lists_cut == CUT_THREADS_CYCLE | CUT_INTERPS_CYCLE
    assert 2 <= len(threads) <= 6  # before: 64 interpreters x 4096 threads
    for _native, _ident, _holds, pairs, cut in threads:
        assert cut == CUT_CYCLE and 3 * 16 <= len(pairs) <= 9 * 16  # before: 4096 frames


def _stack(native: int, cut: int) -> ThreadStack:
    info = CodeInfo("m.f", "m", "m.py", 1, b"", Frame("m.f", "m.py", 1))
    return ThreadStack(native, native, False, b"k", ((info, 3),), cut=cut)


def test_the_dump_says_which_walk_was_cut_and_why():
    found = Dump(
        [_stack(1, CUT_NONE), _stack(2, CUT_CYCLE), _stack(3, CUT_DEPTH)],
        CUT_THREADS_CYCLE | CUT_THREADS_DEPTH,
    )
    text = format_dump(os.getpid(), found)
    lines = text.splitlines()
    assert lines.count("    m.f (m.py:3)") == 3
    assert "    (walk cut: the frame chain loops back on itself)" in lines
    assert "    (walk cut: more than 4096 frames)" in lines
    assert lines[-2:] == [
        "(thread list cut: it loops back on itself)",
        "(thread list cut: more than 4096 threads)",
    ]
    whole = format_dump(os.getpid(), Dump([_stack(1, CUT_NONE)]))
    assert "cut" not in whole
