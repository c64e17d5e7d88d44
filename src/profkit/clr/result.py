"""Reading the native profiler's result file (``PROFKIT_CLR_OUTPUT``).

``libprofkit_clr.so`` writes one UTF-8 text file at the end of the run: tab-separated
records, one per line, first ``profkit-clr<TAB>1``, last ``end`` (a file without it was
cut short). docs/clr.md documents every record; in short::

    pid <pid>            duration <ns>      lost <events>      method <id> <name>
    thread <tid> <name>  node <tid> <n> <parent> <method> <calls> <incl> <min> <max>
    module <id> <base> <flags> <path>      code <start> <size> jit|r2r <module id> <name>
    event <t> <tid> <kind> <text>          (exception, catch, thread-*, module, assembly, gc-*)
    span <tid> <method> <start> <end> <depth>              (with PROFKIT_TIMELINE)
    alloc, atype, aframe, asite, athread                   (with alloc: clr/allocrecords.py)

Every field is checked; a bad line is one :class:`~profkit.errors.FormatError` naming the
file and the line. Nodes are in creation order, so a parent always precedes its children.
"""

from __future__ import annotations

from profkit._record import field, record
from profkit.clr.allocrecords import ALLOC_FIELDS, AllocResult, read_alloc_record
from profkit.errors import FormatError

MAGIC = "profkit-clr"
VERSION = 1
#: The result of a very long run is still far below this; a bound on memory.
MAX_BYTES = 1 << 30
_U64 = (1 << 64) - 1


@record
class Node:
    index: int
    parent: int
    method: int
    calls: int
    incl: int
    min: int
    max: int


@record
class CodeRange:
    """One code-map entry: a range of native code and the method it belongs to."""

    start: int
    size: int
    kind: str  #: "jit" or "r2r"
    module: int  #: the runtime's ModuleID (see :attr:`ClrResult.modules`)
    name: str


@record
class Module:
    id: int
    base: int
    flags: int
    path: str


@record
class Event:
    t_ns: int  #: since the profiler started
    tid: int
    kind: str
    text: str


@record
class SpanRecord:
    """One shown call on the timeline (``PROFKIT_TIMELINE``); times since the start."""

    tid: int
    method: int
    start_ns: int
    end_ns: int
    depth: int  #: 0 = a call with no hooked caller


@record
class ClrResult:
    """Everything one profiled .NET process reported."""

    pid: int = 0
    info_version: int = 0
    duration_ns: int = 0
    basetime_ns: int = 0
    lost: int = 0
    resyncs: int = 0
    records_dropped: int = 0
    lines: int = 0
    udp_datagrams: int = 0
    udp_dropped: int = 0
    prefixes: list[str] = field(default_factory=list)
    methods: dict[int, str] = field(default_factory=dict)
    threads: dict[int, str] = field(default_factory=dict)  #: tid -> name, in file order
    nodes: dict[int, list[Node]] = field(default_factory=dict)  #: tid -> nodes
    modules: list[Module] = field(default_factory=list)
    code: list[CodeRange] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    spans: list[SpanRecord] = field(default_factory=list)
    spans_dropped: int = 0
    alloc: AllocResult | None = None  #: with PROFKIT_CLR_EVENTS=alloc (clr/allocrecords.py)


def _int(text: str, base: int, what: str, path: str, line: int) -> int:
    if base == 10 and text.isdigit() and text.isascii() and len(text) < 20:
        return int(text)  # the writer's own form: plain digits, below 2**64 (a deep tree has
        # hundreds of thousands of nodes: this is most of reading one)
    try:
        if not text or not text.isascii() or text.strip() != text or text[0] in "+-":
            raise ValueError
        value = int(text, base)
    except ValueError:
        raise FormatError(
            "malformed", f"{what}: {text[:40]!r} is not a number", path=path, line=line
        ) from None
    if value > _U64:
        raise FormatError(
            "malformed", f"{what}: {text[:40]!r} is out of range", path=path, line=line
        )
    return value


#: record -> its number of fields (a name is last; the writer turns tabs in names to spaces)
_FIELDS = {
    "pid": 1,
    "info": 1,
    "duration": 1,
    "basetime": 1,
    "lost": 1,
    "resyncs": 1,
    "records_dropped": 1,
    "lines": 1,
    "udp": 2,
    "prefix": 1,
    "method": 2,
    "thread": 2,
    "node": 8,
    "module": 4,
    "code": 5,
    "event": 4,
    "span": 5,
    "spans_dropped": 1,
    **ALLOC_FIELDS,
}
_SCALARS = {
    "pid": "pid",
    "info": "info_version",
    "duration": "duration_ns",
    "basetime": "basetime_ns",
    "lost": "lost",
    "resyncs": "resyncs",
    "records_dropped": "records_dropped",
    "lines": "lines",
    "spans_dropped": "spans_dropped",
}


def parse_result(data: bytes, path: str = "<clr result>") -> ClrResult:
    """Parse a result file's bytes (see the module docstring)."""
    lines = _framed_lines(data, path)
    out = ClrResult()
    known_tids: set[int] = set()
    for number, line in enumerate(lines[1:-1], start=2):
        parts = line.split("\t")
        record = parts[0]
        want = _FIELDS.get(record)
        if want is None:
            raise FormatError(
                "malformed", f"unknown record {record[:40]!r}", path=path, line=number
            )
        # a name field is last and may not contain a tab (the writer replaces them)
        if len(parts) - 1 != want:
            raise FormatError(
                "malformed",
                f"{record}: {len(parts) - 1} fields, expected {want}",
                path=path,
                line=number,
            )
        _read_record(out, record, parts[1:], path, number, known_tids)
    return out


def _framed_lines(data: bytes, path: str) -> list[str]:
    """The file's lines, checked to begin with the magic and version and end with ``end``."""
    if len(data) > MAX_BYTES:
        raise FormatError("too_large", f"{len(data)} bytes (at most {MAX_BYTES})", path=path)
    text = data.decode("utf-8", "replace")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines or lines[0].split("\t")[0] != MAGIC:
        raise FormatError(
            "bad_magic", f"not a profkit CLR result (no {MAGIC!r} line)", path=path, line=1
        )
    head = lines[0].split("\t")
    if len(head) != 2 or _int(head[1], 10, "version", path, 1) != VERSION:
        raise FormatError(
            "unsupported_version",
            f"version {head[1:]!r} (this profkit reads {VERSION})",
            path=path,
            line=1,
        )
    if lines[-1] != "end":
        raise FormatError(
            "truncated", "no 'end' record: the profiled process stopped before writing it all",
            path=path, line=len(lines),
        )  # fmt: skip
    return lines


def _read_record(
    out: ClrResult, record: str, f: list[str], path: str, number: int, known_tids: set[int]
) -> None:
    """Add one record (its fields ``f``, counted already) to ``out``."""
    if record in ALLOC_FIELDS:
        if out.alloc is None:
            out.alloc = AllocResult()
        read_alloc_record(out.alloc, record, f, path, number)
    elif record in _SCALARS:
        setattr(out, _SCALARS[record], _int(f[0], 10, record, path, number))
    elif record == "udp":
        out.udp_datagrams = _int(f[0], 10, "udp datagrams", path, number)
        out.udp_dropped = _int(f[1], 10, "udp dropped", path, number)
    elif record == "prefix":
        out.prefixes.append(f[0])
    elif record == "method":
        out.methods[_int(f[0], 10, "method id", path, number)] = f[1]
    elif record == "thread":
        tid = _int(f[0], 10, "thread id", path, number)
        out.threads[tid] = f[1]
        known_tids.add(tid)
    elif record == "node":
        _read_node(out, f, path, number, known_tids)
    elif record == "module":
        out.modules.append(
            Module(
                _int(f[0], 16, "module id", path, number),
                _int(f[1], 16, "module base", path, number),
                _int(f[2], 10, "module flags", path, number),
                f[3],
            )
        )
    elif record == "code":
        _read_code(out, f, path, number)
    elif record == "span":
        tid, method, start, end, depth = (_int(v, 10, "span field", path, number) for v in f)
        if method not in out.methods or end < start:
            raise FormatError(
                "malformed", f"span of method {method} ({start}..{end})", path=path, line=number
            )
        out.spans.append(SpanRecord(tid, method, start, end, depth))
    else:  # event
        out.events.append(
            Event(
                _int(f[0], 10, "event time", path, number),
                _int(f[1], 10, "event thread", path, number),
                f[2],
                f[3],
            )
        )


def _read_node(out: ClrResult, f: list[str], path: str, number: int, known_tids: set[int]) -> None:
    """A call-tree node: its thread, parent and method must already be known."""
    tid = _int(f[0], 10, "node thread", path, number)
    if tid not in known_tids:
        raise FormatError("malformed", f"node of unknown thread {tid}", path=path, line=number)
    n, parent, method, calls, incl, lo, hi = [
        _int(v, 10, "node field", path, number) for v in f[1:]
    ]
    nodes = out.nodes.setdefault(tid, [])
    if n != len(nodes) + 1 or parent >= n:
        raise FormatError(
            "malformed", f"node {n} (parent {parent}) out of order", path=path, line=number
        )
    if method != 0 and method not in out.methods:
        raise FormatError(
            "malformed", f"node names unknown method {method}", path=path, line=number
        )
    nodes.append(Node(n, parent, method, calls, incl, lo, hi))


def _read_code(out: ClrResult, f: list[str], path: str, number: int) -> None:
    """A code range: JIT-compiled or ReadyToRun, in a module."""
    if f[2] not in ("jit", "r2r"):
        raise FormatError("malformed", f"code kind {f[2][:20]!r}", path=path, line=number)
    out.code.append(
        CodeRange(
            _int(f[0], 16, "code start", path, number),
            _int(f[1], 16, "code size", path, number),
            f[2],
            _int(f[3], 16, "code module", path, number),
            f[4],
        )
    )


def load_result(path: str) -> ClrResult:
    """Read and parse a result file: a regular file only (a FIFO is refused, never waited
    on), its size checked before reading (:class:`~profkit.errors.UsageError`)."""
    from profkit.clr.inputfile import read_regular

    return parse_result(read_regular(path, MAX_BYTES, "a profkit CLR result"), path)
