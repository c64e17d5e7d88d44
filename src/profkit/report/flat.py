"""Flat (one line per function) and callers (who calls F, what F calls) text views."""

from __future__ import annotations

from collections.abc import Iterable

from profkit.calltree.model import CallProfile
from profkit.errors import UsageError
from profkit.report._fmt import (
    Palette,
    column_header,
    fit,
    not_seen_note,
    peak_note,
    value_formatter,
)
from profkit.report.stats import ROOT, Stats, Totals, collect
from profkit.report.tree import display_names, filter_prefix, frame_label, parse_prefixes

TYPE_CHECKING = False  # typing's, without importing typing at run time (profkit run's start-up)
if TYPE_CHECKING:
    from typing import Literal

    SortKey = Literal["exclusive", "inclusive", "calls"]

_FLAT_COLUMNS = "    self    total      %    calls  "


def profile_stats(
    profile: CallProfile, prefix: str | Iterable[str] | None = None, *, edges: bool = True
) -> Stats:
    """Function and edge totals over every thread, after the prefix filter (``edges``:
    :func:`~profkit.report.stats.collect`'s)."""
    prefixes = parse_prefixes(prefix)
    roots = (filter_prefix(profile, t.root, prefixes) for t in profile.threads)
    return collect(roots, edges=edges)


def render_flat(
    profile: CallProfile,
    *,
    width: int | None = 80,
    color: bool = False,
    min_time_ns: int = 0,
    prefix: str | Iterable[str] | None = None,
    top: int | None = None,
    sort: SortKey = "exclusive",
) -> str:
    """One line per function over all threads: self, total, share of all time, calls.

    Sorted by ``sort`` (self time by default: where the time is actually spent);
    functions whose inclusive time is under ``min_time_ns`` are left out. ``width=None``:
    names in full (a file or a pipe), as the tree does.
    """
    pal = Palette(color)
    format_ns = value_formatter(profile.mode)  # bytes for a memory profile
    stats = profile_stats(profile, prefix, edges=False)  # the flat view shows no callers
    base = stats.total_ns or 1
    labels = display_names(profile)
    rows = [(f, t) for f, t in stats.functions.items() if t.inclusive_ns >= min_time_ns]
    rows.sort(key=lambda r: (-_sort_value(r[1], sort), labels[r[0]]))
    if top is not None:
        rows = rows[: max(top, 0)]
    room = None if width is None else max(width, len(_FLAT_COLUMNS) + 16) - len(_FLAT_COLUMNS)
    out = [pal.bold(f"{len(stats.functions)} functions, {format_ns(stats.total_ns)} in total")]
    for note in (compensation_note(profile), peak_note(profile), not_seen_note(profile)):
        if note:
            out.append(pal.dim(note))
    out.append(pal.dim(column_header(_FLAT_COLUMNS, profile.mode)))
    for frame, t in rows:
        share = t.exclusive_ns / base
        cols = (
            f"{format_ns(t.exclusive_ns):>8} {format_ns(t.inclusive_ns):>8} "
            f"{100 * share:>5.1f}% {t.calls:>8}  "
        )
        out.append(pal.heat(share, cols) + fit(labels[frame], room))
    if len(rows) < len(stats.functions):
        out.append(pal.dim(f"… {len(stats.functions) - len(rows)} more functions not shown"))
    return "\n".join(out) + "\n"


def compensation_note(profile: CallProfile) -> str | None:
    """One line saying that the times had the profiler's own cost per call taken out
    (metadata ``compensation``, elt/compensate.py), so nobody compares them with another
    profiler's raw times unawares; None for a profile whose times are as recorded."""
    meta = profile.metadata.get("compensation")
    if not (isinstance(meta, dict) and meta.get("applied") is True):
        return None
    costs = meta.get("cost_per_call_ns")
    per_call = ""
    if isinstance(costs, dict):
        try:
            py = float(costs["python_callee"]) + float(costs["python_caller"])
            c = float(costs["c_callee"]) + float(costs["c_caller"])
            per_call = f": {py:.0f} ns Python, {c:.0f} ns C"
        except (KeyError, TypeError, ValueError):
            per_call = ""
    return f"profkit's own cost per call taken out{per_call} (raw: --no-compensate)"


def _sort_value(t: Totals, key: SortKey) -> int:
    return {"exclusive": t.exclusive_ns, "inclusive": t.inclusive_ns, "calls": t.calls}[key]


def find_functions(profile: CallProfile, query: str) -> list[int]:
    """Frames named ``query``; else those ending in ``.query``; else containing it."""
    names = [(i, f.name) for i, f in enumerate(profile.frames)]
    for test in (
        lambda n: n == query,
        lambda n: n.endswith("." + query),
        lambda n: query in n,
    ):
        found = sorted({i for i, n in names if test(n)}, key=lambda i: names[i][1])
        if found:
            return found
    return []


def render_callers(
    profile: CallProfile,
    function: str,
    *,
    width: int | None = 80,
    color: bool = False,
    prefix: str | Iterable[str] | None = None,
) -> str:
    """For each function matching ``function``: its callers and its callees, hottest first
    (``width=None``: names in full)."""
    pal = Palette(color)
    format_ns = value_formatter(profile.mode)  # bytes for a memory profile
    matches = find_functions(profile, function)
    if not matches:
        raise UsageError(f"no function matches {function!r} in this profile")
    stats = profile_stats(profile, prefix)
    width = None if width is None else max(width, 50)
    out: list[str] = []
    for frame in matches:
        t = stats.functions.get(frame)
        if t is None:
            continue  # filtered out by the prefix
        if out:
            out.append("")
        out.append(pal.bold(fit(frame_label(profile.frames, frame), width)))
        counted = "calls" if profile.mode == "trace" else "samples"
        out.append(
            f"  {t.calls} {counted}, {format_ns(t.inclusive_ns)} total, "
            f"{format_ns(t.exclusive_ns)} self"
        )
        callers = [(a, e) for (a, b), e in stats.edges.items() if b == frame]
        callees = [(b, e) for (a, b), e in stats.edges.items() if a == frame]
        for title, rows in (("called by", callers), ("calls", callees)):
            out.append(f"  {title}:" + ("" if rows else " (nothing)"))
            rows.sort(key=lambda r: -r[1].inclusive_ns)
            for other, e in rows:
                label = "<thread start>" if other == ROOT else frame_label(profile.frames, other)
                cols = f"    {format_ns(e.inclusive_ns):>8} {e.calls:>8}  "
                out.append(cols + fit(label, None if width is None else width - len(cols)))
    if not out:
        raise UsageError(f"{function!r} has no calls under the prefix")
    return "\n".join(out) + "\n"
