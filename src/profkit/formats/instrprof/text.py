"""The text profile format (.proftext): reader and writer (spec §6).

The reader follows ``TextInstrProfReader`` (LLVM 22) rule for rule — blank and ``#``
lines are skipped everywhere, hashes and bitmap bytes take an automatic radix, counters
are decimal only, the optional value block is detected by "the next line parses as a
u32" — but reports every problem with its line number instead of LLVM's bare
"malformed instrumentation profile data". The writer
(:mod:`.text_writer`, re-exported here) reproduces what ``llvm-profdata merge --text``
prints.
"""

from __future__ import annotations

from profkit.errors import ProfileFormatError
from profkit.formats.instrprof.hashing import name_md5
from profkit.formats.instrprof.model import (
    FunctionRecord,
    Profile,
    ProfileKind,
    TemporalTrace,
    ValueKind,
)

# The writer is text_writer.py; its names are re-exported here, where callers have always
# found them, and the reader takes the spellings both sides share from it.
from profkit.formats.instrprof.text_writer import (
    EXTERNAL_SYMBOL,
    NAMED_KINDS,
)
from profkit.formats.instrprof.text_writer import NEWEST_DIALECT as NEWEST_DIALECT
from profkit.formats.instrprof.text_writer import TEXT_DIALECTS as TEXT_DIALECTS
from profkit.formats.instrprof.text_writer import format_text as format_text
from profkit.formats.instrprof.text_writer import write_text as write_text

U64_MAX = (1 << 64) - 1
U32_MAX = (1 << 32) - 1
U8_MAX = 0xFF

# ---------------------------------------------------------------------------------------
# integers with LLVM's StringRef::getAsInteger rules


_RADIX_DIGITS = {
    radix: frozenset(b"0123456789abcdefABCDEF"[: radix if radix <= 10 else 10 + 2 * (radix - 10)])
    for radix in (2, 8, 16)
}


def _digits(text: bytes, radix: int) -> int | None:
    # int() would also accept '_', '+' and spaces; LLVM does not.
    if not text or not _RADIX_DIGITS[radix].issuperset(text):
        return None
    return int(text, radix)


def _decimal(text: bytes) -> int | None:
    """Decimal digits only; None when the value cannot fit in 64 bits.

    Leading zeros are allowed (as ``getAsInteger`` allows them) but do not count:
    ``int()`` refuses more than 4,300 decimal digits with a ValueError, so a long number
    is judged by its length before it is converted.
    """
    if not text.isdigit():
        return None
    significant = text.lstrip(b"0")
    if len(significant) > _U64_DIGITS:
        return None
    return int(significant or b"0")


_U64_DIGITS = len(str(U64_MAX))


def parse_uint(text: bytes, radix: int, limit: int = U64_MAX) -> int | None:
    """``getAsInteger`` for unsigned types: radix 0 = auto (0x, 0b, 0o, leading 0 → octal).

    Returns None where LLVM's call reports failure (bad digit, empty, overflow).
    """
    if radix == 10:
        value = _decimal(text)
    elif radix == 0:
        low = text[:2].lower()
        if low == b"0x":
            value = _digits(text[2:], 16)
        elif low == b"0b":
            value = _digits(text[2:], 2)
        elif text[:2] == b"0o":
            value = _digits(text[2:], 8)
        elif len(text) > 1 and text[:1] == b"0" and text[1:2].isdigit():
            value = _digits(text[1:], 8)
        else:
            value = _decimal(text)
    else:  # pragma: no cover - not used
        value = _digits(text, radix)
    if value is None or value > limit:
        return None
    return value


# ---------------------------------------------------------------------------------------
# reader


class _Lines:
    """The reader's view of the file: non-blank, non-comment lines with their numbers."""

    __slots__ = ("items", "last_line", "path", "pos")

    def __init__(self, data: bytes, path: str | None) -> None:
        items: list[tuple[int, bytes]] = []
        for number, line in enumerate(data.split(b"\n"), start=1):
            if line.endswith(b"\r"):
                line = line[:-1]
            if line and not line.startswith(b"#"):
                items.append((number, line))
        self.items = items
        self.pos = 0
        self.path = path
        self.last_line = data.count(b"\n") + 1

    def at_end(self) -> bool:
        return self.pos >= len(self.items)

    def remaining(self) -> int:
        return len(self.items) - self.pos

    def peek(self) -> bytes:
        return self.items[self.pos][1] if self.pos < len(self.items) else b""

    def line_no(self) -> int:
        return self.items[self.pos][0] if self.pos < len(self.items) else self.last_line

    def next(self, what: str) -> bytes:
        if self.pos >= len(self.items):
            raise self.error("truncated", f"file ends where {what} was expected")
        line = self.items[self.pos][1]
        self.pos += 1
        return line

    def error(self, kind: str, detail: str, line: int | None = None) -> ProfileFormatError:
        return ProfileFormatError(
            kind,  # type: ignore[arg-type]
            detail,
            path=self.path,
            line=self.line_no() if line is None else line,
        )

    def number(self, what: str, radix: int, limit: int = U64_MAX) -> int:
        line_no = self.line_no()
        line = self.next(what)
        value = parse_uint(line, radix, limit)
        if value is None:
            shown = line[:40].decode("utf-8", "replace")
            base = "a decimal" if radix == 10 else "an"
            raise self.error(
                "malformed", f"{what} is not {base} integer ≤ {limit}: {shown!r}", line_no
            )
        return value


_FLAGS: dict[bytes, tuple[ProfileKind, bool]] = {
    b"ir": (ProfileKind.IR, True),
    b"fe": (ProfileKind.FRONTEND, True),
    b"csir": (ProfileKind.IR | ProfileKind.CS_IR, True),
    b"entry_first": (ProfileKind.ENTRY_FIRST, True),
    b"not_entry_first": (ProfileKind.ENTRY_FIRST, False),
    b"instrument_loop_entries": (ProfileKind.INSTR_LOOP_ENTRIES, True),
    b"single_byte_coverage": (ProfileKind.SINGLE_BYTE_COVERAGE, True),
    b"temporal_prof_traces": (ProfileKind.TEMPORAL, True),
}


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


def parse_text(data: bytes, path: str | None = None) -> Profile:
    """Parse a .proftext file into a :class:`Profile` (records in file order, not merged).

    Raises :class:`ProfileFormatError` naming the line for anything LLVM would reject.
    """
    lines = _Lines(data, path)
    profile = Profile(kind=ProfileKind.NONE, format="text")
    kind = ProfileKind.NONE
    while not lines.at_end() and lines.peek().startswith(b":"):
        line_no = lines.line_no()
        flag = lines.next("a header flag")[1:].lower()
        if flag not in _FLAGS:
            shown = flag[:40].decode("utf-8", "replace")
            raise lines.error("malformed", f"unknown header flag ':{shown}'", line_no)
        bits, on = _FLAGS[flag]
        kind = kind | bits if on else kind & ~bits
        if flag == b"temporal_prof_traces":
            _read_traces(lines, profile)
    profile.kind = kind
    symtab = profile.symtab
    while not lines.at_end():
        record = _read_record(lines, profile)
        symtab.setdefault(name_md5(record.name), record.name)
        profile.records.append(record)
    return profile


def _read_traces(lines: _Lines, profile: Profile) -> None:
    count = lines.number("number of temporal traces", 0, U32_MAX)
    profile.temporal_trace_stream_size = lines.number("temporal trace stream size", 0)
    if count * 2 > lines.remaining():
        raise lines.error("truncated", f"{count} temporal traces declared, the file is shorter")
    for _ in range(count):
        weight = lines.number("temporal trace weight", 0)
        names = [n.strip() for n in lines.next("temporal trace function list").split(b",")]
        refs = tuple(name_md5(n) for n in names if n)
        profile.temporal_traces.append(TemporalTrace(weight, refs))


def _read_record(lines: _Lines, profile: Profile) -> FunctionRecord:
    name = _decode(lines.next("a function name"))
    func_hash = lines.number("function hash", 0)
    num_counters = lines.number("number of counters", 10)
    if num_counters == 0:
        raise lines.error("malformed", "number of counters is zero", lines.items[lines.pos - 1][0])
    if num_counters > lines.remaining():
        raise lines.error(
            "truncated", f"{num_counters} counters declared, only {lines.remaining()} lines remain"
        )
    counts = [lines.number("counter value", 10) for _ in range(num_counters)]
    bitmap = b""
    if lines.peek().startswith(b"$"):
        line_no = lines.line_no()
        num_bytes = parse_uint(lines.next("bitmap size")[1:].strip(), 0)
        if num_bytes is None:
            raise lines.error("malformed", "number of bitmap bytes is not a valid integer", line_no)
        if num_bytes > lines.remaining():
            raise lines.error(
                "truncated",
                f"{num_bytes} bitmap bytes declared, only {lines.remaining()} lines remain",
            )
        bitmap = bytes(lines.number("bitmap byte", 0, U8_MAX) for _ in range(num_bytes))
    record = FunctionRecord(name, func_hash, counts, bitmap)
    _read_values(lines, profile, record)
    return record


def _read_values(lines: _Lines, profile: Profile, record: FunctionRecord) -> None:
    if lines.at_end():
        return
    num_kinds = parse_uint(lines.peek(), 10, U32_MAX)
    if num_kinds is None:
        return  # no value block: the line is the next function's name
    if num_kinds == 0 or num_kinds > len(ValueKind):
        raise lines.error("malformed", f"number of value kinds is invalid: {num_kinds}")
    lines.next("number of value kinds")
    for _ in range(num_kinds):
        line_no = lines.line_no()
        kind_no = lines.number("value kind", 10, U32_MAX)
        if kind_no >= len(ValueKind):
            raise lines.error("malformed", f"value kind is invalid: {kind_no}", line_no)
        kind = ValueKind(kind_no)
        num_sites = lines.number("number of value sites", 10, U32_MAX)
        if num_sites > lines.remaining():
            raise lines.error(
                "truncated",
                f"{num_sites} value sites declared, only {lines.remaining()} lines remain",
            )
        if num_sites == 0:
            continue
        sites = record.value_sites.setdefault(kind, [])
        for _ in range(num_sites):
            num_values = lines.number("number of values at a site", 10, U32_MAX)
            if num_values > lines.remaining():
                raise lines.error(
                    "truncated",
                    f"{num_values} values declared, only {lines.remaining()} lines remain",
                )
            sites.append([_read_value(lines, profile, kind) for _ in range(num_values)])


def _read_value(lines: _Lines, profile: Profile, kind: ValueKind) -> tuple[int, int]:
    line_no = lines.line_no()
    line = lines.next("a value:count line")
    target, sep, count_text = line.rpartition(b":")
    if not sep:
        target, count_text = b"", line  # LLVM's rsplit leaves the whole line on the right
    if kind in NAMED_KINDS:
        name = _decode(target)
        if name == EXTERNAL_SYMBOL:
            value = 0
        else:
            value = name_md5(name)
            table = (
                profile.symtab if kind == ValueKind.INDIRECT_CALL_TARGET else profile.vtable_names
            )
            table.setdefault(value, name)
    else:
        parsed = parse_uint(target, 10)
        if parsed is None:
            raise lines.error(
                "malformed", f"value is not a decimal integer: {line[:40]!r}", line_no
            )
        value = parsed
    count = parse_uint(count_text, 10)
    if count is None:
        raise lines.error(
            "malformed", f"value count is not a decimal integer: {line[:40]!r}", line_no
        )
    return value, count
