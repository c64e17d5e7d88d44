"""The worker processes of ``merge -j``: they never outlive the merge.

A worker dies with its parent (``prctl(PR_SET_PDEATHSIG)``, so ``kill -9`` of the merge
takes it along), leaves Ctrl-C (sent to the whole process group) to the parent, and
takes SIGTERM as an ordinary process does, whatever handler the parent had installed
when it forked. The parent kills the pool at once when the merge is interrupted or fails
(:func:`kill_workers`): ``ProcessPoolExecutor.shutdown`` would wait for every share.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from typing import Any

#: A ``multiprocessing.Value`` in workers: inputs done, read by the parent's progress bar.
_counter: Any = None
#: ``prctl(PR_SET_PDEATHSIG, sig)``: the kernel sends ``sig`` when the parent exits.
_PR_SET_PDEATHSIG = 1


def init_worker(counter: Any, parent: int) -> None:
    """``ProcessPoolExecutor`` initializer: the signal rules above, and the counter."""
    global _counter
    _counter = counter
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    die_with_parent(parent)


def count_done() -> bool:
    """Count one input done; False outside a worker (the caller reports progress itself)."""
    if _counter is None:
        return False
    with _counter.get_lock():
        _counter.value += 1
    return True


def die_with_parent(parent: int) -> None:
    """Ask Linux to SIGKILL this process when its parent dies; exit if it already has."""
    if sys.platform.startswith("linux"):
        import ctypes

        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        except (OSError, AttributeError):  # pragma: no cover - no prctl in this libc
            pass
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)


def kill_workers(pool: Any) -> None:
    """Stop every worker of ``pool`` now (the merge was interrupted or failed).

    ``ProcessPoolExecutor`` has no public way to do this; its ``_processes`` map (pid →
    process) exists in every supported Python (3.11-3.13).
    """
    procs = list((getattr(pool, "_processes", None) or {}).values())
    for proc in procs:
        with contextlib.suppress(OSError, ValueError, AttributeError):  # already gone
            proc.kill()
    for proc in procs:
        with contextlib.suppress(OSError, ValueError, AttributeError, AssertionError):
            proc.join(timeout=5)
