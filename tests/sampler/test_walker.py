"""The C walker on hostile memory: frame chains and chunks built in this process.

``process_vm_readv`` may read our own memory, so a fake ``_PyInterpreterFrame`` chain in a
ctypes buffer is a target whose every byte the test chooses: cycles, huge chunk sizes,
dangling pointers. The walker must answer (bounded) or raise OSError, never hang or crash.
"""

from __future__ import annotations

import ctypes
import os
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from profkit.sampler.pywalk import CUT_CYCLE, CUT_DEPTH, CUT_NONE
from profkit.sampler.reader import CUT_THREADS_CYCLE

walker = pytest.importorskip("profkit.sampler._walker", reason="the C walker is not built")

# span, code, previous, instr, owner, chunk_previous, chunk_size, max_depth, max_chunk
PARAMS = (72, 0, 8, 56, 70, 0, 8, 4096, 1 << 20)
FRAME = 72


def _buffer(size: int) -> tuple[ctypes.Array[ctypes.c_char], int]:
    buf = ctypes.create_string_buffer(size)
    return buf, ctypes.addressof(buf)


def _frame(buf, base: int, index: int, code: int, previous: int, owner: int = 0, skip: int = 0):
    at = skip + index * FRAME
    struct.pack_into("<Q", buf, at + 0, code)
    struct.pack_into("<Q", buf, at + 8, previous)
    struct.pack_into("<Q", buf, at + 56, code + 200)
    buf[at + 70] = bytes([owner])
    return base + at


def test_a_cyclic_chain_is_found_in_a_few_frames_and_said():
    # Before: a looping chain ran to max_depth (4096 frames a thread: issue #22, item 7).
    buf, base = _buffer(FRAME * 2)
    a = base
    b = base + FRAME
    _frame(buf, base, 0, 0x1000, b)
    _frame(buf, base, 1, 0x2000, a)  # b -> a -> b -> ...
    pairs, torn, cut = walker.walk(os.getpid(), a, 0, (*PARAMS[:7], 100, PARAMS[8]))
    assert 2 * 16 <= len(pairs) <= 4 * 16
    assert (torn, cut) == (0, CUT_CYCLE)


def test_a_long_chain_is_cut_at_max_depth_and_said():
    buf, base = _buffer(FRAME * 5)
    frames = [base + i * FRAME for i in range(5)]
    for i in range(5):
        _frame(buf, base, i, 0x1000 * (i + 1), frames[i + 1] if i < 4 else 0)
    pairs, _, cut = walker.walk(os.getpid(), frames[0], 0, (*PARAMS[:7], 3, PARAMS[8]))
    assert (len(pairs), cut) == (3 * 16, CUT_DEPTH)
    pairs, _, cut = walker.walk(os.getpid(), frames[0], 0, (*PARAMS[:7], 5, PARAMS[8]))
    assert (len(pairs), cut) == (5 * 16, CUT_NONE)  # exactly max_depth frames: not cut


def test_c_stack_frames_are_skipped_and_a_generator_end_is_cut():
    buf, base = _buffer(FRAME * 3)
    third = _frame(buf, base, 2, 0x3000, 0, owner=1)  # a generator's frame, no previous
    second = _frame(buf, base, 1, 0x2000, third, owner=3)  # a C-stack shim
    first = _frame(buf, base, 0, 0x1000, second)
    pairs, torn, cut = walker.walk(os.getpid(), first, 0, PARAMS)
    codes = [c for c, _ in struct.iter_unpack("=QQ", pairs)]
    assert codes == [0x1000, 0x3000]
    assert (torn, cut) == (1, CUT_NONE)


def test_a_huge_chunk_size_is_not_allocated():
    buf, base = _buffer(64 + FRAME)
    struct.pack_into("<QQ", buf, 0, 0, 1 << 62)  # previous 0, size 2**62
    frame = _frame(buf, base, 0, 0x1000, 0, skip=64)
    assert frame == base + 64
    pairs, _, _ = walker.walk(os.getpid(), frame, base, PARAMS)
    assert struct.unpack("=QQ", pairs)[0] == 0x1000


def test_an_unmapped_frame_is_an_oserror():
    with pytest.raises(OSError):
        walker.walk(os.getpid(), 8, 0, PARAMS)


def test_bad_offsets_are_refused():
    with pytest.raises(ValueError):
        walker.walk(os.getpid(), 0, 0, (72, 70, 8, 56, 70, 0, 8, 10, 1 << 20))


@settings(max_examples=150, deadline=None)
@given(st.binary(min_size=FRAME * 4, max_size=FRAME * 4), st.integers(0, 3), st.integers(0, 4))
def test_random_memory_never_crashes(content, start, chunk_at):
    buf, base = _buffer(len(content))
    ctypes.memmove(base, content, len(content))
    # Point some "previous" words back into the buffer so chains run a while.
    for i in range(4):
        if content[i] & 1:
            struct.pack_into("<Q", buf, i * FRAME + 8, base + ((i + 1) % 4) * FRAME)
    chunk = base if chunk_at == 0 else 0
    try:
        pairs, torn, cut = walker.walk(os.getpid(), base + start * FRAME, chunk, PARAMS)
    except OSError:
        return
    assert len(pairs) % 16 == 0 and len(pairs) <= 16 * PARAMS[7]
    assert torn in (0, 1) and cut in (CUT_NONE, CUT_DEPTH, CUT_CYCLE)


def test_a_cyclic_thread_list_is_found_and_said():
    # runtime: interpreters.head at 0; interp: next at 0, threads.head at 8;
    # tstate: next 8, thread_id 16, native id 24, chunk 32, top 40 (unused here: no generator),
    # current_frame 40 (span 48).
    buf, base = _buffer(64 * 3 + FRAME)
    runtime, interp, tstate, frame = base, base + 64, base + 128, base + 192
    struct.pack_into("<Q", buf, 0, interp)
    struct.pack_into("<QQ", buf, 64, 0, tstate)
    struct.pack_into("<QQQQQQ", buf, 128, 0, tstate, 77, 4242, 0, frame)  # next = itself
    _frame(buf, base, 0, 0x1000, 0, skip=192)
    no = (1 << 64) - 1
    params = (0, 0, 8, 48, 8, 16, 24, 32, 40, 40, no, 0, 0, 0, 0, 0, 50, 2)
    threads, torn, retries, lists_cut = walker.sample(os.getpid(), runtime, False, params, PARAMS)
    # Before: the self-loop gave max_threads (50 here, 4096 in the reader) copies.
    assert len(threads) == 1 and torn == 0 and retries == 0
    assert lists_cut == CUT_THREADS_CYCLE
    native, ident, holds, pairs, cut = threads[0]
    assert (native, ident, holds, cut) == (4242, 77, False, CUT_NONE)
    assert struct.unpack("=QQ", pairs)[0] == 0x1000


def test_a_chain_cut_by_a_yield_keeps_the_generator_not_a_fresh_read():
    # The thread's current frame is a generator's (owner 1) whose previous is 0: a yield
    # tore the chain. This memory never changes, so the callers are never found: the walker
    # reads again (twice) for them, then keeps the generator's frame alone. It must not drop
    # the sample or replace it by a later read (that biased samples away from generators).
    buf, base = _buffer(64 * 3 + FRAME)
    runtime, interp, tstate, frame = base, base + 64, base + 128, base + 192
    struct.pack_into("<Q", buf, 0, interp)
    struct.pack_into("<QQ", buf, 64, 0, tstate)
    struct.pack_into("<QQQQQQ", buf, 128, 0, 0, 77, 4242, 0, frame)
    _frame(buf, base, 0, 0x1000, 0, owner=1, skip=192)
    no = (1 << 64) - 1
    params = (0, 0, 8, 48, 8, 16, 24, 32, 40, 40, no, 0, 0, 0, 0, 0, 50, 2)
    threads, torn, retries, lists_cut = walker.sample(os.getpid(), runtime, False, params, PARAMS)
    assert len(threads) == 1 and torn == 0 and retries == 2 and lists_cut == 0
    assert struct.unpack("=QQ", threads[0][3]) == (0x1000, 0x1000 + 200)


def test_the_extension_exports_only_its_init_function():
    """The walker's units share functions (``WALKER_HIDDEN`` in _walker.h); the built module
    exports ``PyInit__walker`` alone, so none can clash with another extension's."""
    from tests.clr.test_exports import exported

    assert exported(walker.__file__) == {"PyInit__walker"}
