"""What one recorded call costs the program, measured on the real hooks: the calibration.

Why: a tracing profiler's own work per call (the interpreter's dispatch to the
callbacks, the recorder's bookkeeping, two clock reads) lands in the recorded times. A
function called millions of times carries it in its own self time (the part between the
two clock reads: *callee* cost) and in its caller's (the part before the first read and
after the last: *caller* cost, plus the caller's ``CALL`` event on 3.12+). On
``python -m json.tool`` that made ``isinstance`` 7.7 % of the run (< 1.1 % unprofiled)
and a function called once (``raw_decode``) a third of its real share.
:func:`profile.Profile.calibrate` measures the pure-Python profiler's cost per event;
this measures ours per call, for Python functions and for C functions separately, where
it lands, so that :mod:`~profkit.profilers.elt.compensate` can take it out.

How, in three steps that cost a few milliseconds of a run:

1. :meth:`Calibration.measure_bare` (before any hook exists: the profiler's
   ``initialize``): the wall time of loops of ``n`` calls to empty Python functions
   (four, in turn) and to cheap C functions (``len``, ``id``, ``abs``, ``callable``),
   unprofiled, best of several.
2. :meth:`Calibration.run_profiled` (``start_events``, just before the program starts):
   the same loops on a thread of their own, through the very hooks and recorder the
   program gets, each repetition under a caller of its own (``py_0``, ``py_1``...), so
   every repetition's callee nodes hold that repetition's recorded time.
3. :meth:`Calibration.costs` (when the profile is built): from the repetition with the
   least wall time (least disturbed by other load), the callee cost is the recorded time
   per call of the callees, and the caller cost what the wall time adds beyond that. The calibration thread is dropped from the profile; its functions never get a
   frame of the saved file.

The calibration's functions are compiled from text under a file name of their own
(:data:`FILE`), which the profiler's filter accepts whatever the prefix.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

from profkit._record import fields, record

TYPE_CHECKING = False  # typing's, without importing typing at run time (profkit run's start-up)
if TYPE_CHECKING:
    from typing import Any

    from profkit.profilers.elt.calcache import CostCache

#: The calibration code's file name (never a real file).
FILE = "<profkit calibration>"
#: Calls per repetition, and repetitions (each ~0.3-1 ms recorded).
CALLS = 2000
REPEATS = 3

_perf_counter_ns = time.perf_counter_ns


def _os_threads() -> int | None:
    """This process's OS threads (``/proc/self/stat``: what 3.12's fork warning counts),
    or None where there is no such file."""
    try:
        with open("/proc/self/stat", "rb") as f:
            return int(f.read().rsplit(b")", 1)[1].split()[17])
    except (OSError, IndexError, ValueError):
        return None


def _source(repeats: int) -> str:
    """The calibration's functions. Each loop calls four different functions in turn, as
    programs do: a loop calling one function over and over would find its node at once
    every time, and measure less than a program pays."""
    lines = [f"def e{k}():\n    pass\n" for k in range(4)]
    for i in range(repeats):
        lines += [
            f"def py_{i}(n, a=e0, b=e1, c=e2, d=e3):",
            "    for _ in range(n):",
            "        a()",
            "        b()",
            "        c()",
            "        d()",
            "",
            f"def c_{i}(n, a=len, b=id, c=abs, d=callable, x=()):",
            "    for _ in range(n):",
            "        a(x)",
            "        b(x)",
            "        c(-1)",
            "        d(x)",
            "",
        ]
    return "\n".join(lines)


def _compile(repeats: int) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": FILE}
    exec(compile(_source(repeats), FILE, "exec"), namespace)
    return namespace


@record(frozen=True)
class Costs:
    """Nanoseconds a recorded call adds: inside the callee's time, and to its caller's."""

    python_callee: float
    python_caller: float
    c_callee: float
    c_caller: float

    def as_metadata(self) -> dict[str, float]:
        return {k: round(getattr(self, k), 1) for k in fields(Costs)}


class Calibration:
    """One run's calibration (see the module docstring for the three steps), or the
    costs a :class:`~profkit.profilers.elt.calcache.CostCache` kept from earlier runs
    (:attr:`cached`: then nothing is measured, no thread started, nothing compiled)."""

    def __init__(
        self, calls: int = CALLS, repeats: int = REPEATS, cache: CostCache | None = None
    ) -> None:
        self.calls = calls
        self.repeats = repeats
        #: where measurements are kept (None: not kept)
        self.cache = cache
        #: the costs the cache gives, once it holds enough measurements
        self.cached = cache.costs() if cache is not None else None
        self._ns = {} if self.cached is not None else _compile(repeats)
        #: the calibration's code objects: the profiler's filter accepts them
        self.codes = frozenset(
            f.__code__ for name, f in self._ns.items() if name != "__builtins__" and callable(f)
        )
        self.bare: dict[str, int] = {}
        #: ("py"|"c", repetition) -> wall ns of that repetition, profiled
        self.profiled: dict[tuple[str, int], int] = {}
        self.thread: threading.Thread | None = None
        #: while :meth:`run_profiled` waits for the thread (afterwards its id is free)
        self._running = False
        #: the thread's token as the recorder got it (set by the profiler)
        self.token: object | None = None

    def _time(self, kind: str, rep: int) -> int:
        f = self._ns[f"{kind}_{rep}"]
        start = _perf_counter_ns()
        f(self.calls // 4)
        return _perf_counter_ns() - start

    def measure_bare(self) -> None:
        """Step 1: unprofiled wall times, best of the repetitions (no hook may be on)."""
        if self.cached is not None:
            return
        for kind in ("py", "c"):
            self._time(kind, 0)  # warm: first call, caches
            self.bare[kind] = min(self._time(kind, r) for r in range(self.repeats))

    def run_profiled(self) -> None:
        """Step 2: the loops on a thread of their own, recorded; returns when it ended.

        The thread is named (so ``threading``'s counter of unnamed threads, which names
        the program's ``Thread-1``, does not move) and gone before the program starts.
        """
        if self.cached is not None:
            return

        def work() -> None:
            for k in range(4):  # the first calls go through the collector's discovery
                self._ns[f"e{k}"]()
            for rep in range(self.repeats):
                for kind in ("py", "c"):
                    self.profiled[kind, rep] = self._time(kind, rep)

        before = _os_threads()
        thread = self.thread = threading.Thread(
            target=work, name="profkit-calibration", daemon=True
        )
        self._running = True
        try:
            thread.start()
            thread.join()
        finally:
            self._running = False  # its id may be reused by the program's first thread
        # join() returns before the OS thread is gone; a program that forks at once
        # would see two threads (3.12+ warns: "This process is multi-threaded...").
        deadline = _perf_counter_ns() + 200_000_000
        while before is not None and (_os_threads() or 0) > before:
            if _perf_counter_ns() > deadline:
                break
            time.sleep(0.0002)

    def summary(self) -> dict[str, Any]:
        """The measurements behind the costs, for the profile's metadata."""
        if self.cached is not None:
            assert self.cache is not None
            return {"cached": self.cache.path}
        return {
            "calls": self.calls,
            "bare_ns": dict(self.bare),
            "profiled_ns": {
                kind: sorted(w for (k, _), w in self.profiled.items() if k == kind)
                for kind in ("py", "c")
            },
        }

    def is_calibration_thread(self) -> bool:
        """Whether the calling thread is the calibration's (by id: ``current_thread()``
        would make a dummy ``Thread`` for it before ``threading`` has registered it)."""
        thread = self.thread
        return self._running and thread is not None and thread.ident == threading.get_ident()

    def costs(
        self, rows: Sequence[int], cols: int, frame_name: Callable[[int], str]
    ) -> Costs | None:
        """Step 3: the costs from the calibration thread's exported rows (``cols`` int64
        columns a row: parent, frame, calls, inclusive, ...) whose frames
        ``frame_name`` names (``py_0``, ``empty``, ``builtins.len``...); None when the
        Python calls were not recorded (or not measured unprofiled)."""
        recorded: dict[tuple[str, int], tuple[int, int]] = {}
        callers: dict[int, tuple[str, int]] = {}
        for at in range(len(rows) // cols):
            row = rows[at * cols : at * cols + 4]
            parent, frame, calls, incl = row[0], row[1], row[2], row[3]
            name = frame_name(frame) if frame >= 0 else ""
            kind, _, number = name.rpartition("_")
            if kind in ("py", "c") and number.isdigit():
                callers[at] = (kind, int(number))
            elif parent in callers and calls:
                before = recorded.get(callers[parent], (0, 0))
                recorded[callers[parent]] = (before[0] + calls, before[1] + incl)
        if "py" not in self.bare or not any(k == "py" for k, _ in recorded):
            return None
        out: dict[str, tuple[float, float]] = {}
        for kind in ("py", "c"):
            timed = [
                (wall, rep)
                for (k, rep), wall in self.profiled.items()
                if k == kind and (kind, rep) in recorded
            ]
            if not timed or kind not in self.bare:
                out[kind] = (0.0, 0.0)
                continue
            wall, rep = min(timed)
            calls, incl = recorded[kind, rep]
            callee = incl / calls
            total = (wall - self.bare[kind]) / calls
            out[kind] = (max(callee, 0.0), max(total - callee, 0.0))
        return Costs(*out["py"], *out["c"])

    def remember(self, costs: Costs) -> None:
        """Keep freshly measured ``costs`` for later runs (when there is a cache)."""
        if self.cache is not None and self.cached is None:
            self.cache.add(costs)
