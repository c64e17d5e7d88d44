"""``profkit attach --mode memory PID`` on a .NET process: prints and saves (the work is
:func:`profkit.dotnet.memory_engine.allocations_of_pid`'s)."""

from __future__ import annotations

import argparse
import contextlib
import sys
import threading

from profkit.export.destination import Destination


def attach_memory(
    args: argparse.Namespace,
    pid: int,
    duration: float | None,
    destination: Destination,
    stopping: contextlib.AbstractContextManager[None],
    stop: threading.Event,
) -> int:
    """Watch ``pid``'s allocations until ``duration``, Ctrl-C or its exit; save them."""
    from profkit.dotnet.memory_engine import allocations_of_pid
    from profkit.runner import output as out

    print(
        f"profkit: watching pid {pid}'s allocations (.NET, EventPipe GCAllocationTick, "
        "~1 event per 100 KB); Ctrl-C to stop",
        file=sys.stderr,
    )
    raw = destination.file.endswith(".nettrace")
    with stopping, open(destination.file, "wb") if raw else contextlib.nullcontext() as fh:
        profile, why = allocations_of_pid(pid, duration=duration, stop=stop, raw=fh)
    if not raw:
        error = destination.save(profile)
        if error:
            raise OSError(f"cannot write profile {destination.file}: {error}")
    if not args.no_tree:
        sys.stderr.write(out.render(profile, sys.stderr))
    meta = profile.metadata
    ended = f"pid {pid} exited" if why == "exited" else f"stopped; pid {pid} runs on"
    print(
        f"profkit: ~{meta['allocated_bytes'] / 2**20:.1f} MiB allocated (estimated from "
        f"{meta['alloc_samples']} GCAllocationTick events), {meta['gc']['count']} GC(s); {ended}",
        file=sys.stderr,
    )
    if raw:
        print(f"profkit: EventPipe stream (nettrace) saved to {destination.path}", file=sys.stderr)
    else:
        sys.stderr.write(destination.announcement())
    return 0
