"""``attach``, ``top`` and ``dump`` on a .NET process: the library side (the CLI prints).

All three are one :class:`~profkit.dotnet.session.LiveSession` of different lengths: attach
samples until a duration, Ctrl-C or the target's exit; top redraws from the same session
while it runs; dump is a session of a few sampling ticks whose first sample of each
thread is that thread's stack now (the runtime's sampler suspends the runtime for a
moment at each tick, as it does for any EventPipe client; profkit itself never pauses it).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, BinaryIO

from profkit._record import field, record
from profkit._text import escape
from profkit._topkeys import LEGEND, status
from profkit.calltree.model import CallProfile
from profkit.dotnet.methods import UNKNOWN
from profkit.dotnet.profile import EXTERNAL, name_stack, thread_label
from profkit.dotnet.session import LiveSession
from profkit.formats.nettrace import clr_events as ce

#: how long dump samples: enough ticks for every thread to be seen once on a busy machine
DUMP_SECONDS = 0.3
#: and how long it waits on for a first sample when none came (the sampler's ticks can be
#: hundreds of milliseconds apart on a loaded machine)
DUMP_PATIENCE_S = 5.0


def sample_pid(
    pid: int,
    *,
    duration: float | None,
    stop: threading.Event,
    clock: str = "wall",
    on_tick: Callable[[LiveSession], None] | None = None,
    every_s: float = 1.0,
    metadata: dict[str, Any] | None = None,
    raw: BinaryIO | None = None,
) -> tuple[CallProfile, str]:
    """Sample ``pid`` and return its profile and how sampling ended (``duration``,
    ``stopped``, ``exited``). ``on_tick`` is called every ``every_s`` and once at the end
    (``top``); ``raw``
    receives the session's nettrace stream as it arrives."""
    session = LiveSession(pid, raw=raw)
    why = "stopped"
    try:
        end = None if duration is None else time.monotonic() + duration
        while True:
            step = every_s if on_tick is not None else None
            if end is not None:
                left = end - time.monotonic()
                step = left if step is None else min(step, left)
            why = session.wait(step, stop)
            if (
                why == "duration"
                and on_tick is not None
                and (end is None or time.monotonic() < end)
            ):
                on_tick(session)
                continue
            break
    finally:
        session.stop()
    if on_tick is not None:
        on_tick(session)  # the last screen, with the rundown's names
    if why == "duration" and duration is None:
        why = "stopped"
    return session.profile(clock, metadata), why


@record
class ThreadNow:
    """One thread's stack in a dump: innermost frame first."""

    tid: int
    name: str
    external: bool
    frames: list[str] = field(default_factory=list)


def dump(pid: int, seconds: float = DUMP_SECONDS) -> list[ThreadNow]:
    """Every managed thread's current stack: the first sample of each thread."""
    session = LiveSession(pid, names_session=False)
    never = threading.Event()
    try:
        ended = session.wait(seconds, never)
        waited = seconds
        while ended == "duration" and not session.collector.samples and waited < DUMP_PATIENCE_S:
            ended = session.wait(0.1, never)  # a loaded machine: the first tick comes late
            waited += 0.1
    finally:
        session.stop()
    out = []
    collector = session.collector
    stacks = session.stream.parser.stacks
    for tid in sorted(collector.threads, key=lambda t: (t != pid, t)):
        first = collector.threads[tid].first
        if first is None:
            continue
        stack_id, kind = first
        names = name_stack(stacks.get(stack_id, ()), collector.methods.name, {})
        out.append(
            ThreadNow(
                tid,
                thread_label(tid, pid, session.names),
                kind == ce.SAMPLE_EXTERNAL,
                list(reversed(names)),
            )
        )
    return out


def format_dump(pid: int, threads: list[ThreadNow]) -> str:
    """``profkit dump``'s text for a .NET process, like the Python one's."""
    lines = []
    for t in threads:
        state = " [in external code]" if t.external else ""
        lines.append(f"Thread {t.tid} ({escape(t.name)}){state}:")
        if not t.frames:
            lines.append("    (no managed frames)")
        for name in t.frames:
            lines.append(f"    {escape(name, 512)}")
    if not lines:
        lines.append(f"pid {pid}: no managed thread was sampled")
    return "\n".join(lines) + "\n"


@record
class TopState:
    """What the previous screen showed (the next one shows what changed since)."""

    own: dict[str, int] = field(default_factory=dict)
    total: dict[str, int] = field(default_factory=dict)
    weight: int = 0
    sort: int = 0  #: the column the rows are sorted by (keys 1-4, as the Python top)
    paused: bool = False  #: the screen stays as it was; sampling goes on
    quit: bool = False


def _times(profile: CallProfile) -> tuple[dict[str, int], dict[str, int], int]:
    own: dict[str, int] = {}
    total: dict[str, int] = {}
    weight = 0
    for thread in profile.threads:
        weight += thread.root.inclusive_ns
        pending = [(c, frozenset[int]()) for c in thread.root.children.values()]
        while pending:
            node, above = pending.pop()
            name = profile.frames[node.frame].name
            own[name] = own.get(name, 0) + node.exclusive_ns
            if node.frame not in above:  # recursion: counted once per path
                total[name] = total.get(name, 0) + node.inclusive_ns
            inner = above | {node.frame}
            pending.extend((c, inner) for c in node.children.values())
    return own, total, weight


def render_top(session: LiveSession, state: TopState, *, rows: int = 25, width: int = 100) -> str:
    """One screen of ``top`` for a .NET process (no escape codes); updates ``state``."""
    profile = session.profile()
    own, total, weight = _times(profile)
    recent = max(weight - state.weight, 0)
    d_own = {k: v - state.own.get(k, 0) for k, v in own.items()}
    d_total = {k: v - state.total.get(k, 0) for k, v in total.items()}
    sampler = profile.metadata.get("sampler", {})
    head = (
        f"profkit top: pid {session.pid} (.NET)  threads {len(profile.threads)}  "
        f"samples {sampler.get('samples', 0)}  methods named {sampler.get('methods_named', 0)}"
    )
    lines = [
        head[:width],
        LEGEND[:width],
        status(state)[:width],
        f"{'%Own':>6} {'%Total':>7} {'OwnTime':>9} {'TotalTime':>10}  Method",
    ]
    first = (d_own, d_total, own, total)[state.sort]
    order = sorted(
        total,
        key=lambda k: (first.get(k, 0), d_own.get(k, 0), d_total.get(k, 0)),
        reverse=True,
    )
    for name in order[:rows]:
        pct_own = 100.0 * d_own.get(name, 0) / recent if recent else 0.0
        pct_total = 100.0 * d_total.get(name, 0) / recent if recent else 0.0
        shown = name if name in (EXTERNAL, UNKNOWN) else escape(name, 512)
        row = (
            f"{pct_own:6.1f} {pct_total:7.1f} {own.get(name, 0) / 1e9:8.2f}s "
            f"{total[name] / 1e9:9.2f}s  {shown}"
        )
        lines.append(row[:width])
    state.own, state.total, state.weight = own, total, weight
    return "\n".join(lines) + "\n"
