"""The `START SIZE NAME` line grammar shared by r2rmap and perf-PID.map files.

Both formats are one entry per line: a hex start, a hex size, then the rest of the line
as the name (spec §0). They differ only in how writers render the numbers, so one parser
serves both and records the rendering as a :class:`LineStyle`, which the writers reuse
to reproduce a file byte for byte.

Speed matters (a long-running .NET service's map reaches 10^5–10^6 lines, spec §5), so
there are three paths with one meaning: the numpy path (:mod:`._fastparse`) for files
whose every line has the common single-blank shape; one multi-line regex for the rest
of the grammar (a match count equal to the line count proves every line well-formed);
and a per-line pass that runs only when some line is broken, to name that line.

Tolerance follows Linux perf's own parser where that is sane (spec §2.2/§2.3): optional
``0x``/``0X`` on either number, either hex case, leading blanks, tabs or several blanks
between the numbers, and CR before LF. Exactly one blank separates the size from the
name, so a name's own leading spaces survive (perf keeps them too). Unlike perf, a
trailing CR is stripped from names, and broken lines are errors (``strict``) or are
skipped and counted, never silently half-parsed.
"""

from __future__ import annotations

import gc
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from profkit.errors import FormatErrorKind, PerfMapFormatError
from profkit.formats.perfmap._fastparse import fast_parse

U64_MAX = (1 << 64) - 1

#: One well-formed line. ``$`` in MULTILINE mode stops before ``\n`` only; ``.`` never
#: crosses a line, so at most one match per line and ``len(matches) == lines`` proves
#: every line well-formed.
_LINE_RX = re.compile(
    r"^[ \t]*(?:0[xX])?([0-9A-Fa-f]+)[ \t]+(?:0[xX])?([0-9A-Fa-f]+)[ \t](.+)$", re.MULTILINE
)
_HEX_RX = re.compile(r"(?:0[xX])?([0-9A-Fa-f]+)")
_STYLE_SAMPLE = 1000


@dataclass(frozen=True)
class LineStyle:
    """How a writer rendered the numbers and line ends; enough to re-render the file.

    ``address_width``/``size_width`` are zero-padding widths (0 = unpadded); ``prefix``
    is what precedes the address (``""`` or ``"0x"``). The style is taken from the
    first lines of a file; a file mixing styles is rewritten in the first one.
    """

    prefix: str = ""
    address_upper: bool = False
    size_upper: bool = False
    address_width: int = 0
    size_width: int = 0
    separator: str = " "
    newline: str = "\n"
    final_newline: bool = True

    def line_format(self) -> str:
        """A ``str.format`` template for one line (without the newline)."""
        a_kind = "X" if self.address_upper else "x"
        s_kind = "X" if self.size_upper else "x"
        sep = self.separator
        return (
            f"{self.prefix}{{0:0{self.address_width}{a_kind}}}{sep}"
            f"{{1:0{self.size_width}{s_kind}}}{sep}{{2}}"
        )


#: Styles of the writers seen in the wild (spec §1.3, §1.11, §2.4, §2.6).
CROSSGEN2_STYLE = LineStyle(address_upper=True, size_upper=True, address_width=8, size_width=2)
CROSSGEN1_STYLE = LineStyle(address_width=8)
DOTNET_PAL_STYLE = LineStyle(address_upper=True, address_width=16)
DOTNET8_STYLE = LineStyle(prefix="0x")
CPYTHON_STYLE = LineStyle()
PERF_STYLE = LineStyle()  # what jit-interface.txt asks for: plain lowercase hex


@dataclass
class ParsedLines:
    """Columns of the parsed entries plus what the reader skipped (lenient mode)."""

    starts: np.ndarray
    sizes: np.ndarray
    names: Sequence[str]
    style: LineStyle
    #: 1-based line number of each entry; None when entry i sits on line i + 1.
    line_numbers: list[int] | None = None
    skipped: list[tuple[int, str]] = field(default_factory=list)

    def line_of(self, index: int) -> int:
        """The 1-based line number of entry ``index``."""
        return self.line_numbers[index] if self.line_numbers is not None else index + 1


@contextmanager
def _no_gc() -> Iterator[None]:
    """Pause the cyclic GC while building ~10^6 small objects that cannot form cycles."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _count_lines(text: str) -> int:
    if not text:
        return 0
    return text.count("\n") + (0 if text.endswith("\n") else 1)


def _to_u64(tokens: Sequence[str]) -> np.ndarray:
    """Hex tokens to uint64; OverflowError if one needs more than 64 bits."""
    return np.fromiter(map(int, tokens, [16] * len(tokens)), dtype=np.uint64, count=len(tokens))


def parse_lines(
    data: bytes,
    *,
    path: str | None,
    strict: bool,
    max_start: int = U64_MAX,
    max_size: int = U64_MAX,
    start_what: str = "address",
) -> ParsedLines:
    """Parse ``START SIZE NAME`` lines; raise or skip (``strict``) broken ones.

    Names are decoded UTF-8 with ``surrogateescape``, so arbitrary bytes survive a
    read/write round trip exactly. ``max_start``/``max_size`` bound the numbers (an
    RVA is 32-bit); a larger value is a ``too_large`` error naming the line.
    """
    with _no_gc():
        fast = fast_parse(data)
        if fast is not None:
            head = data[: 200 * _STYLE_SAMPLE].decode("utf-8", "surrogateescape")
            style = detect_style(head, crlf=b"\r" in data, final_newline=_ends_line(data))
            parsed = ParsedLines(fast[0], fast[1], fast[2], style)
            if _within(parsed, max_start, max_size):
                return parsed
        text = data.decode("utf-8", "surrogateescape")
        regex = _regex_parse(text)  # its temporaries die here, before the GC is back on
        if regex is not None and _within(regex, max_start, max_size):
            return regex
        return _slow_parse(text, path, strict, max_start, max_size, start_what)


def _ends_line(data: bytes) -> bool:
    return not data or data.endswith(b"\n")


def _regex_parse(text: str) -> ParsedLines | None:
    """The tolerant path (tabs, several blanks, long zero-padded numbers): one regex."""
    matches = _LINE_RX.findall(text)
    if len(matches) != _count_lines(text):
        return None
    if matches:
        a_col, s_col, n_col = zip(*matches, strict=True)
    else:
        a_col, s_col, n_col = (), (), ()
    try:
        starts = _to_u64(a_col)
        sizes = _to_u64(s_col)
    except OverflowError:
        return None
    names = list(n_col)
    crlf = "\r" in text
    if crlf:
        names = [n[:-1] if n.endswith("\r") else n for n in names]
        if "" in names:
            return None  # a name that was only CR: let the slow path name the line
    style = detect_style(
        text[: 200 * _STYLE_SAMPLE], crlf=crlf, final_newline=_ends_line_text(text)
    )
    return ParsedLines(starts, sizes, names, style)


def _ends_line_text(text: str) -> bool:
    return not text or text.endswith("\n")


def _within(parsed: ParsedLines, max_start: int, max_size: int) -> bool:
    if not len(parsed.starts):
        return True
    return int(parsed.starts.max()) <= max_start and int(parsed.sizes.max()) <= max_size


def detect_style(text: str, *, crlf: bool, final_newline: bool) -> LineStyle:
    """The rendering of the first entry lines (padding widths, case, prefix, line end)."""
    head = text[: 200 * _STYLE_SAMPLE].split("\n", _STYLE_SAMPLE)[:_STYLE_SAMPLE]
    addr_tokens: list[str] = []
    size_tokens: list[str] = []
    prefix, separator = "", " "
    for i, line in enumerate(head):
        m = re.match(r"[ \t]*(0[xX])?([0-9A-Fa-f]+)([ \t]+)(?:0[xX])?([0-9A-Fa-f]+)", line)
        if m is None:
            continue
        if not addr_tokens or i == 0:
            prefix, separator = m.group(1) or "", m.group(3)[:1]
        addr_tokens.append(m.group(2))
        size_tokens.append(m.group(4))
    return LineStyle(
        prefix=prefix,
        address_upper=_is_upper(addr_tokens),
        size_upper=_is_upper(size_tokens),
        address_width=_pad_width(addr_tokens),
        size_width=_pad_width(size_tokens),
        separator=separator,
        newline="\r\n" if crlf and head and head[0].endswith("\r") else "\n",
        final_newline=final_newline,
    )


def _is_upper(tokens: Sequence[str]) -> bool:
    letters = "".join(tokens)
    return any(c in "ABCDEF" for c in letters) and not any(c in "abcdef" for c in letters)


def _pad_width(tokens: Sequence[str]) -> int:
    """Zero-padding width: the shortest zero-led token's length (0 if none is zero-led)."""
    padded = [len(t) for t in tokens if len(t) > 1 and t[0] == "0"]
    if not padded:
        return 0
    width = min(padded)
    # A padded writer never emits a shorter token; if one exists, the zeros were digits.
    return width if all(len(t) >= width for t in tokens) else 0


def _slow_parse(
    text: str, path: str | None, strict: bool, max_start: int, max_size: int, start_what: str
) -> ParsedLines:
    """Per-line pass: find and name the broken lines (strict) or skip them."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    starts: list[int] = []
    sizes: list[int] = []
    names: list[str] = []
    numbers: list[int] = []
    skipped: list[tuple[int, str]] = []
    for lineno, line in enumerate(lines, 1):
        try:
            start, size, name = parse_one(line, max_start, max_size, start_what)
        except _LineProblem as problem:
            if strict:
                raise PerfMapFormatError(
                    problem.kind, problem.detail, path=path, line=lineno
                ) from None
            skipped.append((lineno, f"{problem.kind}: {problem.detail}"))
            continue
        starts.append(start)
        sizes.append(size)
        names.append(name)
        numbers.append(lineno)
    style = detect_style(text, crlf="\r" in text, final_newline=_ends_line_text(text))
    return ParsedLines(
        np.array(starts, dtype=np.uint64),
        np.array(sizes, dtype=np.uint64),
        names,
        style,
        line_numbers=numbers,
        skipped=skipped,
    )


class _LineProblem(Exception):
    def __init__(self, kind: FormatErrorKind, detail: str) -> None:
        super().__init__(detail)
        self.kind = kind
        self.detail = detail


def _show(token: str, limit: int = 40) -> str:
    """A token for an error message: escaped, shortened, never a raw control byte."""
    raw = token.encode("utf-8", "surrogateescape")[: limit + 1]
    # the bytes' repr: every byte that is not printable ASCII as one \xNN (a decode-then-
    # ascii() round showed raw bytes as \\xNN beside valid UTF-8 controls as \xNN)
    shown = "'" + repr(raw[:limit])[2:-1] + "'"
    return shown + ("…" if len(raw) > limit else "")


def parse_one(line: str, max_start: int, max_size: int, start_what: str) -> tuple[int, int, str]:
    """Parse one line (no LF); raise :class:`_LineProblem` saying what is wrong."""
    if line.endswith("\r"):
        line = line[:-1]
    if not line.strip(" \t"):
        raise _LineProblem("truncated", "empty line")
    pos = len(line) - len(line.lstrip(" \t"))
    values: list[int] = []
    for what, limit in ((start_what, max_start), ("size", max_size)):
        end = pos
        while end < len(line) and line[end] not in " \t":
            end += 1
        token = line[pos:end]
        if not token:
            raise _LineProblem("truncated", f"line ends before the {what}")
        m = _HEX_RX.fullmatch(token)
        if m is None:
            raise _LineProblem("malformed", f"{what} {_show(token)} is not a hex number")
        value = int(m.group(1), 16) if len(m.group(1)) <= 64 else limit + 1
        if value > limit:
            bits = limit.bit_length()
            raise _LineProblem("too_large", f"{what} {_show(token)} does not fit in {bits} bits")
        values.append(value)
        pos = end
        if what == start_what:
            while pos < len(line) and line[pos] in " \t":
                pos += 1
    if pos + 1 >= len(line):
        raise _LineProblem("truncated", "line ends before the name")
    return values[0], values[1], line[pos + 1 :]


def render_lines(
    starts: Sequence[int] | np.ndarray,
    sizes: Sequence[int] | np.ndarray,
    names: Sequence[str],
    style: LineStyle,
    *,
    head: Sequence[str] = (),
) -> bytes:
    """Render entries (after the pre-rendered ``head`` lines) in ``style``, as bytes."""
    fmt = style.line_format().format
    a_list = starts.tolist() if isinstance(starts, np.ndarray) else list(starts)
    s_list = sizes.tolist() if isinstance(sizes, np.ndarray) else list(sizes)
    with _no_gc():
        lines = list(head)
        lines.extend(map(fmt, a_list, s_list, names))
    if not lines:
        return b""
    text = style.newline.join(lines)
    if style.final_newline:
        text += style.newline
    return text.encode("utf-8", "surrogateescape")
