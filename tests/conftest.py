"""Suite-wide set-up: Ctrl-C tests work in a background run; no test writes to ~/.cache.

A shell starts a background job (``cmd &`` without job control, ``nohup``, some CI
runners) with SIGINT and SIGQUIT ignored, and an ignored disposition survives ``exec``:
every program the tests start would then inherit it, and CPython, seeing SIGINT ignored
at start-up, installs no KeyboardInterrupt handler. The tests that send a program
Ctrl-C (``tests/collect/test_exit_status.py``, ``tests/cli/test_heap.py``, ...) would
fail for a reason that has nothing to do with profkit. A *handled* signal is reset to
its default by ``exec``, so handling SIGINT here gives every child the default
disposition, as a user's terminal does.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import os
import shutil
import signal
import sys
import tempfile

import pytest

if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    with contextlib.suppress(ValueError):  # not the main thread: leave it as it is
        signal.signal(signal.SIGINT, signal.default_int_handler)


# The suite never writes to the user's own cache (profkit keeps its calibration and R2R
# maps under $XDG_CACHE_HOME): one private directory per test process, removed at its end.
_CACHE = tempfile.mkdtemp(prefix="profkit-tests-cache-")
os.environ["XDG_CACHE_HOME"] = _CACHE
atexit.register(shutil.rmtree, _CACHE, ignore_errors=True)


# A profiler a test drops without detaching gives its sys.monitoring tool id back when the
# garbage collector reclaims it (``profilers/elt/profiler.py``'s finalizer; the tool's
# callbacks do not keep it alive), which is at no fixed time. Until then the id is taken,
# and a later test in the same worker that expects the ids profkit picks (the profiler id
# left to cProfile, ``tests/collect/test_coexistence.py``) fails or passes by test order.
# So before each test, a tool a dropped profiler still holds is reclaimed; the check is a
# few ``get_tool`` calls, and a collection runs only when there is such a tool.
_MONITORING = getattr(sys, "monitoring", None)


@pytest.fixture(autouse=True)
def _reclaim_dropped_profilers_tool_ids() -> None:
    if _MONITORING is not None and any(
        (_MONITORING.get_tool(tool) or "").startswith("profkit") for tool in range(6)
    ):
        gc.collect()
