"""Python ``pstats`` files (``pstats.Stats(path)``, snakeviz, gprof2dot).

A pstats file is ``marshal.dumps`` of the dict cProfile builds:
``{(file, line, name): (cc, nc, tt, ct, callers)}`` with
``callers = {(file, line, name): (nc, cc, tt, ct)}``, times in seconds, ``cc`` the
primitive (non-recursive) calls. Note the callers' order: cProfile's ``snapshot_stats``
writes a caller's calls *before* its primitive calls (``print_callers`` shows
``nc/cc``), the reverse of a function's own entry. Top-level functions have no callers.
"""

from __future__ import annotations

import marshal

from profkit.calltree.model import CallProfile, Frame
from profkit.report.stats import ROOT, collect

FuncKey = tuple[str, int, str]


def key(frame: Frame) -> FuncKey:
    """cProfile's function key; ``~`` is cProfile's file name for code without a file."""
    return (frame.file or "~", frame.line, frame.name)


def stats_dict(
    profile: CallProfile,
) -> dict[FuncKey, tuple[int, int, float, float, dict[FuncKey, tuple[int, int, float, float]]]]:
    """The dict ``pstats.Stats`` expects, summed over every thread."""
    stats = collect(t.root for t in profile.threads)
    keys = [key(f) for f in profile.frames]
    # A memory profile's weights are bytes: one "second" a byte, so pstats' three decimals
    # keep every byte (as nanoseconds, 512 KiB showed as 0.001 and smaller rows as 0.000).
    scale = 1.0 if profile.mode == "memory" else 1e9
    out: dict[
        FuncKey, tuple[int, int, float, float, dict[FuncKey, tuple[int, int, float, float]]]
    ] = {}
    callers: dict[int, dict[FuncKey, tuple[int, int, float, float]]] = {}
    for (caller, callee), e in stats.edges.items():
        if caller == ROOT:
            continue
        callers.setdefault(callee, {})[keys[caller]] = (
            e.calls,
            e.primitive_calls,
            e.exclusive_ns / scale,
            e.inclusive_ns / scale,
        )
    for frame, t in stats.functions.items():
        out[keys[frame]] = (
            t.primitive_calls,
            t.calls,
            t.exclusive_ns / scale,
            t.inclusive_ns / scale,
            callers.get(frame, {}),
        )
    return out


#: ``pstats.Stats`` refuses an empty dict, so a profile without calls gets this one entry.
EMPTY_KEY: FuncKey = ("~", 0, "<no calls recorded>")


def write(profile: CallProfile) -> bytes:
    """The profile as a pstats file (marshal data)."""
    stats = stats_dict(profile) or {EMPTY_KEY: (0, 0, 0.0, 0.0, {})}
    return marshal.dumps(stats)
