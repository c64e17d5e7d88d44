"""Shared formatting for the text reports: durations, colours, fitting names in a width."""

from __future__ import annotations

from collections.abc import Callable

from profkit._text import escape
from profkit.errors import UsageError

TYPE_CHECKING = False  # typing's, without importing typing at run time (profkit run's start-up)
if TYPE_CHECKING:
    from profkit.calltree.model import CallProfile

_UNITS = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
#: compiled by ``re`` on first use: the end-of-run tree imports this module and parses no
#: duration, and importing ``re`` cost ~7 M instructions of every ``profkit run`` (issue #26)
_DURATION = r"\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*(ns|us|µs|ms|s)?\s*"


def format_ns(ns: int) -> str:
    """A duration in at most 8 characters with three significant digits (``12.3 ms``)."""
    if ns < 1_000:
        return f"{ns} ns"
    for scale, unit in ((1e3, "µs"), (1e6, "ms")):
        if ns < scale * 999.5:
            return f"{_sig3(ns / scale)} {unit}"
    seconds = ns / 1e9
    return f"{_sig3(seconds)} s" if seconds < 999.5 else f"{seconds:.0f} s"


def format_bytes(size: int) -> str:
    """A byte count in at most 8 characters with three significant digits (``12.3 MiB``):
    memory profiles (``mode: "memory"``) show bytes where the others show time."""
    if size < 1024:
        return f"{size} B"
    for scale, unit in ((1024, "KiB"), (1024**2, "MiB"), (1024**3, "GiB")):
        if size < scale * 999.5:
            return f"{_sig3(size / scale)} {unit}"
    tib = size / 1024**4
    return f"{_sig3(tib)} TiB" if tib < 999.5 else f"{tib:.0f} TiB"


def value_formatter(mode: str) -> Callable[[int], str]:
    """How a profile's weights read: bytes for a memory profile, else time."""
    return format_bytes if mode == "memory" else format_ns


def _sig3(value: float) -> str:
    if value < 9.995:
        return f"{value:.2f}"
    if value < 99.95:
        return f"{value:.1f}"
    return f"{value:.0f}"


def parse_duration(text: str) -> int:
    """``"1ms"``, ``"250us"``, ``"0.5s"``, ``"800ns"`` (bare numbers are ns) → nanoseconds."""
    import re  # (its own cache keeps the compiled pattern)

    match = re.fullmatch(_DURATION, text, re.ASCII)
    if match is None:
        raise UsageError(f"bad duration {text!r}: expected a number with ns, us, ms or s")
    value, unit = match.groups()
    if len(value) > 40:  # 400 digits: float() gives inf and round() raises
        raise UsageError(f"bad duration {escape(text, 60)!r}: too many digits")
    ns = float(value) * _UNITS[unit or "ns"]
    if ns >= 2**63:
        raise UsageError(f"bad duration {text!r}: longer than any profile")
    return round(ns)


def printable(name: str) -> str:
    """``name`` with control and invisible formatting characters shown as escapes
    (``\\n``, ``\\x1b``, ``\\u202e``): :func:`profkit._text.escape`, the one rule.

    A profile may come from anywhere: a frame or thread name carrying a newline would
    break the table, and one carrying ESC could drive the reader's terminal.
    """
    return escape(name)


#: A name shown in full (no width: a file or a pipe) still stops here: a 20 MB name is not a name.
FULL_NAME_CHARS = 1000


def fit(name: str, room: int | None) -> str:
    """``name`` (made :func:`printable`) cut from the left to ``room`` characters: the end
    of a qualname says most. ``room=None`` (output to a file or a pipe, where nothing wraps
    badly and a cut name helps nobody): the name in full, up to :data:`FULL_NAME_CHARS`."""
    if room is None:
        return escape(name, FULL_NAME_CHARS)
    name = printable(name)
    if len(name) <= room:
        return name
    if room <= 1:
        return "…"[:room]
    return "…" + name[len(name) - room + 1 :]


def column_header(columns: str, mode: str) -> str:
    """The column titles; in a sampled profile the count column counts samples, not calls."""
    if mode in ("sample", "memory"):
        columns = columns.replace("   calls", " samples")
    return columns + "function"


class Palette:
    """ANSI colours, or nothing at all when colour is off (so plain output has no escapes)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def _wrap(self, code: str, text: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.enabled else text

    def heat(self, fraction: float, text: str) -> str:
        """Colour by share of the total: red for the hot paths, dim for the noise."""
        if fraction >= 0.5:
            return self._wrap("31", text)
        if fraction >= 0.2:
            return self._wrap("33", text)
        if fraction >= 0.05:
            return self._wrap("32", text)
        return self._wrap("2", text)

    def bold(self, text: str) -> str:
        return self._wrap("1", text)

    def dim(self, text: str) -> str:
        return self._wrap("2", text)


# The two notes under a memory profile, in the flat report and under the end-of-run tree:
# here, so that printing the tree loads neither flat.py nor stats.py (issue #26).
def peak_note(profile: CallProfile) -> str | None:
    """One line saying what a memory profile's peak is, beside the OS's peak RSS.

    The peak is the highest estimated total of live bytes Python's allocators held for the
    program: allocations of at least ``exact_from_bytes`` counted exactly, smaller ones
    sampled (so it is exact when large blocks make it, as they usually do). The OS's peak
    RSS also holds the interpreter and what no hook sees; neither is the other's error.
    """
    if profile.mode != "memory" or not isinstance(profile.metadata.get("peak_bytes"), int):
        return None
    fmt = value_formatter(profile.mode)
    text = f"peak: {fmt(profile.metadata['peak_bytes'])} alive at once"
    exact = profile.metadata.get("exact_from_bytes")
    if isinstance(exact, (int, float)) and exact > 0:
        text += f" (blocks of {fmt(int(exact))} or more exact, smaller ones sampled)"
    rss = profile.metadata.get("peak_rss_bytes")
    if isinstance(rss, int) and rss > 0:
        text += f"; the process's peak RSS (OS, interpreter included) {fmt(rss)}"
    return text


def not_seen_note(profile: CallProfile) -> str | None:
    """One line naming what a memory profile could not count (metadata ``not_seen``,
    profilers/memory.py: e.g. numpy's array data), so a small total is not read as
    "this program uses little memory"; None when nothing is known to be missing."""
    missing = profile.metadata.get("not_seen")
    if not (isinstance(missing, list) and missing):
        return None
    return "not counted: " + "; ".join(str(m) for m in missing)
