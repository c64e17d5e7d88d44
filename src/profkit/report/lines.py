"""The hottest lines of a sampled profile: ``file:line``, the function, samples, share.

The sampler counts, per sample, the line the innermost frame was on (metadata
``sampler.lines``: ``[frame, line, samples]`` rows, recorder.py); the call tree keeps
functions only. This view is what py-spy's ``--lines``, memray's and scalene's line
views show: where the time is, to the line. The share is of every sample in the
profile (the threads' roots), so it reads as the flat view's self share, one level finer.

Traced and memory profiles record no line per sample (the tracer sees calls, not
lines; the allocator hook keys by function), so asking them for lines is a usage error
that says how to get them rather than an empty table.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from profkit._record import record
from profkit.calltree.model import CallProfile
from profkit.errors import ProfileDataError, UsageError
from profkit.report._fmt import Palette, fit
from profkit.report.tree import matches, parse_prefixes

_COLUMNS = " samples      %  "


@record(frozen=True)
class LineRow:
    """Samples whose innermost frame was on ``file:line`` in function ``name``."""

    file: str
    line: int
    name: str
    samples: int


def line_rows(profile: CallProfile, source: str = "") -> tuple[list[LineRow], int]:
    """The profile's per-line rows (unsorted) and its total samples.

    ``source`` names the file in the error a malformed ``sampler.lines`` raises (the
    metadata is free-form JSON; a hand-edited or cut file must not become a traceback).
    """
    sampler = profile.metadata.get("sampler")
    raw = sampler.get("lines") if isinstance(sampler, dict) else None
    if raw is None:
        how = "record with 'profkit run --mode sample' or 'profkit attach'"
        raise UsageError(
            f"{source or 'this profile'} has no per-line samples (mode {profile.mode}): {how}"
        )
    if not isinstance(raw, list):
        raise ProfileDataError(
            "malformed", "metadata sampler.lines is not a list", path=source or None
        )
    rows = []
    frames = profile.frames
    for index, item in enumerate(raw):
        ok = isinstance(item, list) and len(item) == 3 and all(type(v) is int for v in item)
        if not ok or not 0 <= item[0] < len(frames) or item[2] < 0:
            what = f"metadata sampler.lines[{index}] is not [frame, line, samples]"
            raise ProfileDataError("malformed", what, path=source or None)
        frame = frames[item[0]]
        rows.append(LineRow(frame.file, item[1], frame.name, item[2]))
    total = sum(t.root.calls for t in profile.threads)
    return rows, max(total, sum(r.samples for r in rows))


def merge_rows(groups: Iterable[Sequence[LineRow]]) -> list[LineRow]:
    """Rows of several profiles summed by (file, line, function), hottest first."""
    sums: dict[tuple[str, int, str], int] = {}
    for rows in groups:
        for r in rows:
            key = (r.file, r.line, r.name)
            sums[key] = sums.get(key, 0) + r.samples
    out = [LineRow(f, ln, name, n) for (f, ln, name), n in sums.items() if n]
    out.sort(key=lambda r: (-r.samples, r.file, r.line, r.name))
    return out


def render_lines(
    rows: Sequence[LineRow],
    total: int,
    *,
    width: int | None = 80,
    color: bool = False,
    prefix: str | Iterable[str] | None = None,
    top: int | None = None,
) -> str:
    """The hottest lines, one per row: samples, share of all samples, ``file:line``,
    function. ``top`` keeps the first N (default 20, as a terminal page)."""
    pal = Palette(color)
    prefixes = parse_prefixes(prefix)
    shown = [r for r in rows if not prefixes or matches(r.name, prefixes)]
    limit = 20 if top is None else max(top, 0)
    base = total or 1
    room = None if width is None else max(width, len(_COLUMNS) + 16) - len(_COLUMNS)
    out = [pal.bold(f"{len(shown)} lines, {total} samples in total")]
    out.append(pal.dim(_COLUMNS + "line (function)"))
    for r in shown[:limit]:
        share = r.samples / base
        cols = f"{r.samples:>8} {100 * share:>5.1f}%  "
        where = f"{r.file or '?'}:{r.line}"
        out.append(pal.heat(share, cols) + fit(f"{where} ({r.name})", room))
    if len(shown) > limit:
        out.append(pal.dim(f"… {len(shown) - limit} more lines not shown (--top N)"))
    return "\n".join(out) + "\n"
