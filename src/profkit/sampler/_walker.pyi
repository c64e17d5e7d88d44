def read(pid: int, address: int, size: int, /) -> bytes:
    """One process_vm_readv of ``size`` bytes at ``address``; OSError(errno) on failure."""

def walk(
    pid: int,
    frame: int,
    chunk: int,
    params: tuple[int, int, int, int, int, int, int, int, int],
    /,
) -> tuple[bytes, int]:
    """(code, instr) uint64 pairs of the frame chain from ``frame``, innermost first, and
    whether the chain ended at a generator's frame (torn by a yield)."""

def sample(
    pid: int,
    runtime: int,
    want_gil: bool,
    thread_params: tuple[int, ...],
    walk_params: tuple[int, int, int, int, int, int, int, int, int],
    /,
) -> tuple[list[tuple[int, int, bool, bytes]], int, int]:
    """Every thread of every interpreter: ([(native id, thread id, holds GIL, pairs)], torn
    thread walks, walks read again after a yield cut them)."""
