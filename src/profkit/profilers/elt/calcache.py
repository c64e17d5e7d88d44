"""The calibration's costs kept per interpreter and machine, so that ``profkit run`` need
not measure them at every start.

Why: measuring them (:mod:`~profkit.profilers.elt.calibrate`) costs ~30 M instructions a
run, a fifth of what cProfile's whole start costs, for numbers that depend only on the
interpreter, the machine and profkit's own build. So the first runs measure and keep what
they found; later runs read it back.

Where: ``$XDG_CACHE_HOME/profkit/calibration/`` (``~/.cache/...``); ``PROFKIT_CALIBRATION_CACHE``
names another directory, or turns the cache off (``0``, ``off``, ``no``, ``false``). One file
per key; the key (checked on reading, not only hashed into the name) holds the interpreter
(path and full version), profkit's version, the C recorder's file and modification time,
the CPU model, and what changes the recorder's work per call (the collector backend, C
calls, the timeline).

Robust against a measurement taken on a loaded machine: a file keeps the last
:data:`KEEP` measurements; the cache is used only once :data:`MIN_RUNS` of them are
younger than :data:`FRESH_S`, and then gives each cost's *least* value (load only ever
adds time, and taking out too little is the safe side: too much once took a busy run's
times to zero). Older measurements stop counting, so a machine is re-measured
now and then. A file that cannot be read or parsed counts as empty; one that cannot be
written is left alone: the cache never fails a run.

Stdlib only, and no ``json``: this runs before the program starts, on every run.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Mapping

from profkit import __version__
from profkit.api.events import EventMask
from profkit.profilers.elt.calibrate import Costs

TYPE_CHECKING = False  # typing's, without importing typing at run time (profkit run's start-up)
if TYPE_CHECKING:
    from profkit.api import ProfilerInfo
    from profkit.profilers.elt.config import EltSettings

#: The variable naming the cache's directory, or turning it off.
ENV = "PROFKIT_CALIBRATION_CACHE"
#: Fresh measurements needed before the cache is used (each of those runs measures).
MIN_RUNS = 3
#: Measurements a file keeps (the newest).
KEEP = 8
#: How long a measurement counts (seconds): 30 days.
FRESH_S = 30 * 86400
#: A file's first line; a file without it is not ours (or an older layout).
HEADER = "profkit calibration cache 1"
#: Larger costs (ns a call) are not believed: a corrupt file, or a run stopped in a debugger.
MAX_NS = 1_000_000.0
_OFF = ("0", "off", "no", "false")
_INF = float("inf")


def directory(environ: Mapping[str, str] = os.environ) -> str | None:
    """The cache's directory, or None when ``PROFKIT_CALIBRATION_CACHE`` turns it off."""
    given = environ.get(ENV, "").strip()
    if given.lower() in _OFF:
        return None
    if given:
        return given
    root = environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(root, "profkit", "calibration")


def _cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``'s first), or "" where there is none."""
    try:
        with open("/proc/cpuinfo", "rb") as f:
            head = f.read(8192)
    except OSError:
        return ""
    for line in head.split(b"\n"):
        if line.startswith(b"model name"):
            return line.partition(b":")[2].strip().decode("ascii", "replace")
    return ""


def _file_stamp(path: str | None) -> str:
    if not path:
        return "-"
    try:
        return f"{path}@{os.stat(path).st_mtime_ns}"
    except OSError:
        return path


def key(variant: str, recorder_file: str | None) -> str:
    """What the costs depend on, as one line: the interpreter, profkit (its version and
    C recorder build), the machine's CPU, and ``variant`` (the caller's recorder options)."""
    version = sys.version.replace("\n", " ")
    parts = (sys.executable, version, __version__, _file_stamp(recorder_file), _cpu_model())
    return " | ".join((*parts, variant)).replace("\n", " ")


def _name(text: str) -> str:
    """A file name for ``text`` (64-bit FNV-1a: stable across runs, unlike ``hash``)."""
    h = 0xCBF29CE484222325
    for byte in text.encode("utf-8", "replace"):
        h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"calibration-{h:016x}.txt"


def _replace(path: str, data: bytes) -> None:
    """Write ``path`` whole or not at all: a temp file of this process's own, renamed over
    it (runs at the same moment each write a whole file; the last rename wins)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    temp = f"{path}.{os.getpid()}.tmp"
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
        with open(fd, "wb") as f:
            f.write(data)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


class CostCache:
    """One key's file of measurements."""

    def __init__(self, path: str, key: str) -> None:
        self.path = path
        self.key = key

    @classmethod
    def open(
        cls, variant: str, recorder_file: str | None, environ: Mapping[str, str] = os.environ
    ) -> CostCache | None:
        """The cache for this interpreter and machine, or None when it is turned off."""
        where = directory(environ)
        if where is None:
            return None
        text = key(variant, recorder_file)
        return cls(os.path.join(where, _name(text)), text)

    def entries(self) -> list[tuple[float, Costs]]:
        """(seconds since the epoch, costs) of every measurement kept, oldest first; an
        unreadable or corrupt file (or one for another key) holds none."""
        try:
            with open(self.path, encoding="utf-8") as f:
                lines = f.read(1 << 16).split("\n")
        except (OSError, ValueError):
            return []
        if len(lines) < 2 or lines[0] != HEADER or lines[1] != "key " + self.key:
            return []
        out: list[tuple[float, Costs]] = []
        for line in lines[2:]:
            fields = line.split()
            if len(fields) != 5:
                continue
            try:
                when, *ns = (float(x) for x in fields)
            except ValueError:
                continue
            # (comparisons refuse NaN and the infinities: no math module to load for it)
            if all(0.0 <= x <= MAX_NS for x in ns) and -_INF < when < _INF:
                out.append((when, Costs(*ns)))
        return out[-KEEP:]

    def costs(self, now: float | None = None) -> Costs | None:
        """Each cost's least value over the fresh measurements, once there are
        :data:`MIN_RUNS`; None (measure again) before."""
        now = time.time() if now is None else now
        fresh = [c for when, c in self.entries() if now - FRESH_S <= when <= now + 86400]
        if len(fresh) < MIN_RUNS:
            return None
        return Costs(
            min(c.python_callee for c in fresh),
            min(c.python_caller for c in fresh),
            min(c.c_callee for c in fresh),
            min(c.c_caller for c in fresh),
        )

    def add(self, costs: Costs, now: float | None = None) -> bool:
        """Keep one more measurement (the oldest beyond :data:`KEEP` go); False when the
        file could not be written (never an error: the next run measures again)."""
        now = time.time() if now is None else now
        kept = [*self.entries(), (now, costs)][-KEEP:]
        lines = [HEADER, "key " + self.key]
        for when, c in kept:
            ns = (c.python_callee, c.python_caller, c.c_callee, c.c_caller)
            lines.append(f"{when:.0f} " + " ".join(f"{x:.3f}" for x in ns))
        try:
            _replace(self.path, ("\n".join(lines) + "\n").encode())
        except Exception:  # a cache: whatever went wrong, the next run measures again
            return False
        return True


def for_run(info: ProfilerInfo, settings: EltSettings) -> CostCache | None:
    """The cache for a run of the C recorder with these settings (None: turned off).

    Keyed by the collector the run's events will come from, asked for the mask the
    profiler is about to set: at ``initialize`` ``backend_name`` is still ``"auto"``, and
    on 3.11 auto means evalframe without C calls but setprofile when another
    frame-evaluation function is installed, with very different costs a call."""
    c_calls = getattr(settings, "c_calls", True)
    mask = EventMask.ENTER_LEAVE | (EventMask.CODE_TRANSITIONS if c_calls else EventMask.NONE)
    ask = getattr(info, "backend_for", None)  # (an info of before it: its backend_name)
    backend = ask(mask) if ask is not None else info.backend_name
    variant = f"{backend} c_calls={c_calls:d} timeline={getattr(settings, 'timeline', False):d}"
    recorder = sys.modules.get("profkit.profilers.elt._native")
    return CostCache.open(variant, getattr(recorder, "__file__", None))
