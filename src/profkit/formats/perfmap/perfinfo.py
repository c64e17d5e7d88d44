"""The .NET runtime's ``perfinfo-PID.map``: which assemblies loaded, and where.

One line per loaded assembly with a file path, ``ImageLoad;<path>;<mvid>;<base>;``
(spec §2.5). The base is ``%p`` of the loaded layout for R2R images (so it has the
same two renderings as perf-PID.map addresses, plus glibc's ``(nil)``) and 0 for
others; runtimes before ~3.0 wrote no base at all. Nothing is escaped, so a ``;`` in a
path is handled by taking the MVID and base as the *last* fields. Fields are kept as
text, which makes rewriting exact; typed values are derived properties.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass

from profkit.errors import PerfMapFormatError
from profkit.formats.perfmap._io import read_input, write_atomic

IMAGE_LOAD = "ImageLoad"
_GUID = re.compile(
    r"\{?[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}\}?"
)
_BASE = re.compile(r"(?:0[xX])?([0-9A-Fa-f]{1,16})|\(nil\)")


@dataclass(frozen=True)
class PerfInfoRecord:
    """One line. For ``ImageLoad``: path, MVID text, base text (None in the old 3-field form).

    Other record kinds (none are known to exist) keep their text in ``path``.
    """

    kind: str
    path: str
    mvid_text: str = ""
    base_text: str | None = None

    @property
    def mvid(self) -> uuid.UUID | None:
        """The assembly MVID, or None for a non-ImageLoad record."""
        if self.kind != IMAGE_LOAD:
            return None
        return uuid.UUID(self.mvid_text.strip("{}"))

    @property
    def base(self) -> int | None:
        """The image base; 0 means "not an R2R image" (or unknown); None if not recorded."""
        if self.base_text is None:
            return None
        m = _BASE.fullmatch(self.base_text)
        assert m is not None  # checked by the reader
        return int(m.group(1), 16) if m.group(1) else 0

    def render(self) -> str:
        """The line, without its newline."""
        if self.kind != IMAGE_LOAD:
            return f"{self.kind};{self.path}"
        tail = f";{self.base_text}" if self.base_text is not None else ""
        return f"{IMAGE_LOAD};{self.path};{self.mvid_text}{tail};"


@dataclass
class PerfInfo:
    """The records of one perfinfo file, in order."""

    records: list[PerfInfoRecord]
    final_newline: bool = True

    def image_loads(self) -> list[PerfInfoRecord]:
        return [r for r in self.records if r.kind == IMAGE_LOAD]


def _parse_record(line: str) -> PerfInfoRecord:
    """Parse one line; ValueError (with the reason) if it is not a valid record."""
    kind, sep, rest = line.partition(";")
    if not sep or not kind:
        raise ValueError("no ';'-separated record type")
    if kind != IMAGE_LOAD:
        return PerfInfoRecord(kind, rest)
    if not rest.endswith(";"):
        raise ValueError("ImageLoad record does not end with ';'")
    body = rest[:-1]
    parts = body.rsplit(";", 2)
    if len(parts) == 3 and _GUID.fullmatch(parts[1]):
        path, mvid, base = parts
        if not _BASE.fullmatch(base):
            digits = re.fullmatch(r"(?:0[xX])?0*([0-9A-Fa-f]+)", base)
            if digits is not None and len(digits.group(1)) > 16:
                raise OverflowError(f"base {base[:40]!r} does not fit in 64 bits")
            raise ValueError(f"base {base[:40]!r} is not a hex address")
    else:
        parts = body.rsplit(";", 1)
        if len(parts) != 2 or not _GUID.fullmatch(parts[1]):
            raise ValueError("ImageLoad record has no MVID field ({xxxxxxxx-...})")
        (path, mvid), base = parts, None
    if not path:
        raise ValueError("ImageLoad record has an empty path")
    return PerfInfoRecord(IMAGE_LOAD, path, mvid, base)


def read_perfinfo(data: bytes, *, path: str | None = None, strict: bool = True) -> PerfInfo:
    """Parse perfinfo bytes; broken lines raise (``strict``) or are dropped."""
    text = data.decode("utf-8", "surrogateescape")
    lines = text.split("\n")
    final_newline = lines[-1] == ""
    if final_newline:
        lines.pop()
    records = []
    for lineno, line in enumerate(lines, 1):
        try:
            records.append(_parse_record(line.removesuffix("\r")))
        except OverflowError as exc:
            if strict:
                raise PerfMapFormatError("too_large", str(exc), path=path, line=lineno) from None
        except ValueError as exc:
            if strict:
                kind = "truncated" if not line.strip() else "malformed"
                detail = "empty line" if not line.strip() else str(exc)
                raise PerfMapFormatError(kind, detail, path=path, line=lineno) from None  # type: ignore[arg-type]
    return PerfInfo(records, final_newline)


def write_perfinfo(info: PerfInfo) -> bytes:
    """Render the records, one per line (``\\n``), as the runtime does."""
    text = "\n".join(r.render() for r in info.records)
    if info.records and info.final_newline:
        text += "\n"
    return text.encode("utf-8", "surrogateescape")


def load_perfinfo(path: str, *, strict: bool = True) -> PerfInfo:
    """Read a perfinfo file (``-`` is stdin)."""
    return read_perfinfo(read_input(path, PerfMapFormatError), path=path, strict=strict)


def save_perfinfo(info: PerfInfo, path: str) -> None:
    """Write atomically."""
    write_atomic(path, write_perfinfo(info))
