def read(pid: int, address: int, size: int, /) -> bytes:
    """One process_vm_readv of ``size`` bytes at ``address``; OSError(errno) on failure."""

def walk(
    pid: int,
    frame: int,
    chunk: int,
    params: tuple[int, int, int, int, int, int, int, int, int],
    /,
) -> tuple[bytes, int, int]:
    """(code, instr) uint64 pairs of the frame chain from ``frame``, innermost first,
    whether the chain ended at a generator's frame (torn by a yield), and why the walk
    stopped early (pywalk.CUT_*: 0 it did not, 1 max_depth, 2 the chain loops)."""

def sample(
    pid: int,
    runtime: int,
    want_gil: bool,
    thread_params: tuple[int, ...],
    walk_params: tuple[int, int, int, int, int, int, int, int, int],
    /,
) -> tuple[list[tuple[int, int, bool, bytes, int]], int, int, int]:
    """Every thread of every interpreter: ([(native id, thread id, holds GIL, pairs, cut)],
    torn thread walks, walks read again after a yield cut them, the lists cut: reader's
    CUT_THREADS_* / CUT_INTERPS_* flags)."""
