"""``profkit top``'s table: the hottest functions of a running process, refreshed.

Like ``py-spy top``: per function, the share of sampled time where it was running itself
(%Own) and where it was on the stack at all (%Total) over the last refresh, and the
own/total time since the start. Times are the samples' weights (a late read carries its
gap), not counts times the interval: on a busy machine reads are fewer, time is not. The
library only builds text and says what a key does (:func:`press`); the CLI draws and reads
the keys, as py-spy's: ``1``-``4`` sort by a column, ``p`` (or space) pauses the view
(sampling goes on), ``q`` quits.
"""

from __future__ import annotations

from profkit._record import field, record
from profkit._text import escape
from profkit._topkeys import COLUMNS, KEYS, LEGEND, press, status
from profkit.sampler.session import SamplerSession

__all__ = ["COLUMNS", "KEYS", "LEGEND", "TopState", "press", "render_top"]


@record
class TopState:
    """Times (ns) at the previous refresh, so each refresh shows what happened since."""

    own: dict[str, int] = field(default_factory=dict)
    total: dict[str, int] = field(default_factory=dict)
    samples: int = 0
    weight_ns: int = 0
    sort: int = 0  #: the column the rows are sorted by (an index of :data:`COLUMNS`)
    paused: bool = False  #: the screen stays as it was; sampling goes on
    quit: bool = False


#: How each sampling mode counts, for the header (``--mode``; what is known of the GIL).
_MODE_NOTES = {
    "gil": "only the thread holding the GIL counts",
    "active": "idle threads left out",
    "wall": "every thread counts, idle ones too",
    "cpu": "CPU time only",
}


def _times(
    session: SamplerSession,
) -> tuple[dict[str, int], dict[str, int], dict[str, str], int, int]:
    """Own and total ns per function, where each runs, samples and their whole weight."""
    own: dict[str, int] = {}
    total: dict[str, int] = {}
    where: dict[str, str] = {}
    samples = weight = 0
    for rec in session.recorders.values():
        for entry in rec.entries.values():
            samples += entry.samples
            ns = entry.weight_ns
            weight += ns
            seen = set()
            for depth, (info, line) in enumerate(entry.stack):
                name = info.name
                if depth == 0:
                    own[name] = own.get(name, 0) + ns
                    where[name] = f"{info.filename}:{line}"  # where its own time goes
                else:
                    where.setdefault(name, f"{info.filename}:{line}")
                if name not in seen:
                    seen.add(name)
                    total[name] = total.get(name, 0) + ns
    return own, total, where, samples, weight


def render_top(
    session: SamplerSession, state: TopState, *, rows: int = 25, width: int = 100
) -> str:
    """One screen of the table (no escape codes); updates ``state`` for the next call."""
    own, total, where, samples, weight = _times(session)
    recent = max(weight - state.weight_ns, 0)
    d_own = {k: v - state.own.get(k, 0) for k, v in own.items()}
    d_total = {k: v - state.total.get(k, 0) for k, v in total.items()}
    stats = session.stats
    alive = sum(1 for r in session.recorders.values() if not r.ended)
    mode = session.options.mode
    head = (
        f"profkit top: pid {session.pid}  mode {mode} ({_MODE_NOTES.get(mode, mode)})  "
        f"{session.options.rate:g} Hz  processes {alive}  samples {samples}  "
        f"cost {stats.cost_us:.1f} us/tick"
    )
    lines = [head[:width], LEGEND[:width], status(state)[:width]]
    lines.append(
        f"{'%Own':>6} {'%Total':>7} {'OwnTime':>9} {'TotalTime':>10}  Function (file:line)"
    )
    keys = (
        lambda k: d_own.get(k, 0),
        lambda k: d_total.get(k, 0),
        lambda k: own.get(k, 0),
        lambda k: total.get(k, 0),
    )
    first = keys[state.sort]
    order = sorted(
        total, key=lambda k: (first(k), d_own.get(k, 0), d_total.get(k, 0)), reverse=True
    )
    for name in order[:rows]:
        pct_own = 100.0 * d_own.get(name, 0) / recent if recent else 0.0
        pct_total = 100.0 * d_total.get(name, 0) / recent if recent else 0.0
        row = (
            f"{pct_own:6.1f} {pct_total:7.1f} {own.get(name, 0) / 1e9:8.2f}s "
            f"{total[name] / 1e9:9.2f}s  {escape(name, 512)} ({escape(where.get(name, ''), 512)})"
        )
        lines.append(row[:width])
    state.own, state.total, state.samples, state.weight_ns = own, total, samples, weight
    return "\n".join(lines) + "\n"
