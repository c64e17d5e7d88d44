"""The allocation records of the native profiler's result file (``PROFKIT_CLR_EVENTS=alloc``).

``libprofkit_clr.so`` (``csrc/alloc*.c``) appends them before ``end``; docs/clr.md
documents them::

    alloc <mean> <objects> <bytes> <samples> <exact> <untracked> <gcs> <peak> <stack failures>
          <moved> <died>  (followed samples a GC moved / found dead)
    atype <index> <name>        aframe <index> <name>
    asite <index> <tid> <type|-1> <size class> <samples> <bytes> <at peak> <alive at end>
          <frames,...>
    athread <tid> <allocated> <own peak> <at the process's peak> <alive at end>
    astratum <tid> <type|-1> <size class> <objects> <bytes>

``objects``/``bytes`` are exact (every object the runtime reported, by its exact size), and
so is each ``astratum``: a thread's objects of one type whose sizes lie in
``[2**class, 2**(class+1))`` (class 255: the thread's strata beyond the native cap, all
types); the ``alloc`` totals are their sums. A site's bytes are the samples' weights (an
estimate), its samples all of one stratum, its frames outermost first.
:func:`read_alloc_record` checks every field and that each index refers to a record
already read, raising :class:`~profkit.errors.FormatError` naming the file and line.
"""

from __future__ import annotations

from profkit._record import field, record
from profkit.errors import FormatError

#: record -> its number of fields
ALLOC_FIELDS = {"alloc": 11, "atype": 2, "aframe": 2, "asite": 9, "athread": 5, "astratum": 5}
_U64 = (1 << 64) - 1
#: the size class of the "other" stratum (a thread's strata beyond the native cap)
OTHER_CLASS = 255


@record
class AllocSite:
    """A (thread, stack, type) and what its samples stand for."""

    tid: int
    type: int  #: an index of :attr:`AllocResult.types`, or -1 (unnamed)
    samples: int
    bytes: int
    at_peak: int  #: bytes alive when the process's live estimate was highest
    leaked: int  #: bytes alive at the end
    frames: tuple[int, ...]  #: indices of :attr:`AllocResult.frames`, outermost first
    sclass: int = 0  #: the samples' size class (:attr:`AllocStratum.sclass`)

    @property
    def stratum(self) -> tuple[int, int]:
        """The (type, size class) whose exact total this site's samples share."""
        return (-1, OTHER_CLASS) if self.sclass == OTHER_CLASS else (self.type, self.sclass)


@record
class AllocStratum:
    """A thread's exact count of the objects of one type and power-of-two size class."""

    tid: int
    type: int  #: an index of :attr:`AllocResult.types`, or -1 (unnamed, or "other")
    sclass: int  #: sizes in [2**sclass, 2**(sclass+1)); :data:`OTHER_CLASS`: all beyond the cap
    objects: int
    bytes: int

    @property
    def stratum(self) -> tuple[int, int]:
        return (-1, OTHER_CLASS) if self.sclass == OTHER_CLASS else (self.type, self.sclass)


@record
class AllocThread:
    tid: int
    allocated: int
    peak: int  #: the most of its own samples alive at once (at a GC's end)
    at_peak: int
    leaked: int


@record
class AllocResult:
    """Everything the allocation recording reported."""

    mean: int = 0
    objects: int = 0  #: exact: every object allocated while profiled
    bytes: int = 0  #: exact: their sizes
    samples: int = 0
    exact_samples: int = 0  #: objects of at least the mean (always samples)
    untracked: int = 0  #: samples beyond the cap on followed objects
    gcs: int = 0
    peak_bytes: int = 0
    stack_failures: int = 0
    moved: int = 0
    died: int = 0
    types: list[str] = field(default_factory=list)
    frames: list[str] = field(default_factory=list)
    sites: list[AllocSite] = field(default_factory=list)
    threads: list[AllocThread] = field(default_factory=list)
    strata: list[AllocStratum] = field(default_factory=list)


def _num(text: str, what: str, path: str, line: int, low: int = 0) -> int:
    ok = text.isascii() and (text.isdigit() or (text[:1] == "-" and text[1:].isdigit()))
    value = int(text) if ok and len(text) < 21 else None
    if value is None or not low <= value <= _U64:
        raise FormatError("malformed", f"{what}: {text[:40]!r}", path=path, line=line)
    return value


def read_alloc_record(out: AllocResult, record: str, f: list[str], path: str, line: int) -> None:
    """Add one allocation record (its fields ``f``, counted already) to ``out``."""
    if record == "alloc":
        values = [_num(v, "alloc field", path, line) for v in f]
        (out.mean, out.objects, out.bytes, out.samples, out.exact_samples) = values[:5]
        (out.untracked, out.gcs, out.peak_bytes, out.stack_failures) = values[5:9]
        out.moved, out.died = values[9:]
    elif record in ("atype", "aframe"):
        names = out.types if record == "atype" else out.frames
        if _num(f[0], f"{record} index", path, line) != len(names):
            raise FormatError(
                "malformed", f"{record} {f[0][:20]} out of order", path=path, line=line
            )
        names.append(f[1])
    elif record == "asite":
        _read_site(out, f, path, line)
    elif record == "astratum":
        tid = _num(f[0], "astratum thread", path, line)
        kind = _num(f[1], "astratum type", path, line, low=-1)
        sclass = _sclass(f[2], path, line)
        objects, size = (_num(v, "astratum field", path, line) for v in f[3:])
        if kind >= len(out.types):
            raise FormatError("malformed", "astratum names an unknown type", path=path, line=line)
        out.strata.append(AllocStratum(tid, kind, sclass, objects, size))
    else:
        out.threads.append(AllocThread(*(_num(v, "athread field", path, line) for v in f)))


def _sclass(text: str, path: str, line: int) -> int:
    value = _num(text, "size class", path, line)
    if value > 63 and value != OTHER_CLASS:
        raise FormatError("malformed", f"size class {value} (0-63 or 255)", path=path, line=line)
    return value


def _read_site(out: AllocResult, f: list[str], path: str, line: int) -> None:
    if _num(f[0], "asite index", path, line) != len(out.sites):
        raise FormatError("malformed", f"asite {f[0][:20]} out of order", path=path, line=line)
    tid = _num(f[1], "asite thread", path, line)
    kind = _num(f[2], "asite type", path, line, low=-1)
    sclass = _sclass(f[3], path, line)
    samples, weight, at_peak, leaked = (_num(v, "asite field", path, line) for v in f[4:8])
    frames = tuple(_num(v, "asite frame", path, line, low=-1) for v in f[8].split(",") if f[8])
    if kind >= len(out.types) or any(x >= len(out.frames) for x in frames):
        raise FormatError("malformed", "asite names an unknown type or frame", path=path, line=line)
    if at_peak > weight or leaked > weight:
        raise FormatError("malformed", "asite: more alive than allocated", path=path, line=line)
    out.sites.append(AllocSite(tid, kind, samples, weight, at_peak, leaked, frames, sclass))
