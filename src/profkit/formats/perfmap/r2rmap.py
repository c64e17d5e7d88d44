"""ReadyToRun perf maps (``X.ni.r2rmap``, format v1): read, model, write.

A v1 map is text: five (or more, append-only) header pseudo-entries whose "RVA" is a
token ``FFFFFFFF``..``FFFFFFFB`` and whose name field is the value, then one
``RVA LENGTH NAME`` line per compiled method body (spec §1.3–§1.4). The reader decodes
the header into :class:`R2RHeader` but keeps every header line's text, so unknown tokens,
unknown enum numbers and even pre-GA header spellings survive a rewrite unchanged
(spec §1.5, §1.11). Headerless maps (crossgen2 in .NET 5, crossgen1's ``%08x %x``) read
as maps with an empty header.
"""

from __future__ import annotations

import dataclasses
import enum
import re
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from profkit.errors import PerfMapFormatError
from profkit.formats.perfmap._io import read_input, write_atomic
from profkit.formats.perfmap._lines import CROSSGEN2_STYLE, LineStyle, parse_lines, render_lines

#: Pseudo-RVAs at or above this are header records, never code (one-collect uses the same cut).
HEADER_TOKEN_MIN = 0xFFFFFFF0
U32_MAX = 0xFFFFFFFF


class HeaderToken(enum.IntEnum):
    """The pseudo-RVAs of the v1 header, in the order crossgen2 writes them."""

    SIGNATURE = 0xFFFFFFFF
    VERSION = 0xFFFFFFFE
    OS = 0xFFFFFFFD
    ARCHITECTURE = 0xFFFFFFFC
    ABI = 0xFFFFFFFB


class PerfMapOS(enum.IntEnum):
    """``PerfMapOSToken`` (spec §1.5). 7 is OpenBSD in the current doc, Haiku in one revision."""

    UNKNOWN = 0
    WINDOWS = 1
    LINUX = 2
    OSX = 3
    FREEBSD = 4
    NETBSD = 5
    SUNOS = 6
    OPENBSD = 7
    BROWSER = 8
    WASI = 9


class PerfMapArchitecture(enum.IntEnum):
    """``PerfMapArchitectureToken`` (spec §1.5), including the newer RiscV64/LoongArch64/Wasm."""

    UNKNOWN = 0
    ARM = 1
    ARM64 = 2
    X64 = 3
    X86 = 4
    RISCV64 = 5
    LOONGARCH64 = 6
    WASM = 7


class PerfMapAbi(enum.IntEnum):
    """``PerfMapAbiToken`` (spec §1.5)."""

    UNKNOWN = 0
    DEFAULT = 1
    ARMEL = 2


_DISPLAY = {
    "OSX": "OSX", "FREEBSD": "FreeBSD", "NETBSD": "NetBSD", "SUNOS": "SunOS",
    "OPENBSD": "OpenBSD", "ARM64": "ARM64", "X64": "X64", "X86": "X86", "ARM": "ARM",
    "RISCV64": "RiscV64", "LOONGARCH64": "LoongArch64", "WASI": "Wasi",
}  # fmt: skip


def token_name(enum_type: type[enum.IntEnum], value: int | None) -> str:
    """The .NET spelling of an enum token, ``unknown(N)`` for numbers this code predates."""
    if value is None:
        return "absent"
    try:
        member = enum_type(value)
    except ValueError:
        return f"unknown({value})"
    return _DISPLAY.get(member.name, member.name.capitalize())


@dataclass(frozen=True)
class HeaderRecord:
    """One header line: pseudo-RVA token, its length field (always 0 in practice), raw value."""

    token: int
    length: int
    value: str


@dataclass(frozen=True)
class R2RHeader:
    """The typed view of a map's header lines; :attr:`records` is the source of truth.

    Values that do not parse (e.g. the .NET 6 preview's ``FFFFFFFE 00 Linux``) decode
    to None instead of failing, because the method lines are still usable.
    """

    records: tuple[HeaderRecord, ...] = ()

    def _value(self, token: HeaderToken) -> str | None:
        for record in self.records:
            if record.token == token:
                return record.value
        return None

    def _number(self, token: HeaderToken) -> int | None:
        text = self._value(token)
        if text is None or not text.isascii() or not text.isdigit() or len(text) > 10:
            return None
        value = int(text)
        return value if value <= U32_MAX else None

    @property
    def signature(self) -> bytes | None:
        """The 16 signature bytes, or None when absent or not 32 hex digits."""
        text = self._value(HeaderToken.SIGNATURE)
        if text is None or not re.fullmatch(r"[0-9A-Fa-f]{32}", text):
            return None
        return bytes.fromhex(text)

    @property
    def version(self) -> int | None:
        return self._number(HeaderToken.VERSION)

    @property
    def os(self) -> int | None:
        return self._number(HeaderToken.OS)

    @property
    def architecture(self) -> int | None:
        return self._number(HeaderToken.ARCHITECTURE)

    @property
    def abi(self) -> int | None:
        return self._number(HeaderToken.ABI)

    @property
    def is_symstore_valid(self) -> bool:
        """True when the first five records are exactly what dotnet/symstore requires (§1.4)."""
        tokens = [r.token for r in self.records[:5]]
        return (
            tokens == [t.value for t in HeaderToken]
            and all(r.length == 0 for r in self.records[:5])
            and self.signature is not None
        )

    @classmethod
    def build(
        cls, signature: bytes, *, version: int = 1, os: int, architecture: int, abi: int
    ) -> R2RHeader:
        """The five records crossgen2 writes, in its fixed order and spelling."""
        if len(signature) != 16:
            raise ValueError(f"signature must be 16 bytes, got {len(signature)}")
        values = (signature.hex().upper(), str(version), str(os), str(architecture), str(abi))
        return cls(
            tuple(HeaderRecord(t.value, 0, v) for t, v in zip(HeaderToken, values, strict=True))
        )

    def describe(self) -> dict[str, object]:
        """Names and numbers for display (``profkit perfmap show``)."""
        sig = self.signature
        return {
            "signature": sig.hex().upper()
            if sig is not None
            else self._value(HeaderToken.SIGNATURE),
            "version": self.version,
            "os": self.os,
            "os_name": token_name(PerfMapOS, self.os),
            "architecture": self.architecture,
            "architecture_name": token_name(PerfMapArchitecture, self.architecture),
            "abi": self.abi,
            "abi_name": token_name(PerfMapAbi, self.abi),
            "records": len(self.records),
        }


class R2REntry(NamedTuple):
    """One method body (hot part, or a cold part that repeats the name)."""

    rva: int
    length: int
    name: str


@dataclass
class R2RPerfMap:
    """A ReadyToRun perf map: header plus method columns (RVA, length, name).

    Columns are numpy arrays (uint64 holding 32-bit values) so a 500k-entry map stays
    small and feeds the :class:`~profkit.formats.perfmap.symbolizer.Symbolizer` as is.
    Entries keep file order, duplicates and overlaps; sorting is the consumer's job.
    """

    header: R2RHeader
    rvas: np.ndarray
    lengths: np.ndarray
    #: A list, or the lazily decoded column the fast reader returns (decodes on access).
    names: Sequence[str]
    style: LineStyle = CROSSGEN2_STYLE
    skipped: list[tuple[int, str]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.names)

    def entries(self) -> Iterator[R2REntry]:
        """The method entries, in file order."""
        return map(R2REntry, self.rvas.tolist(), self.lengths.tolist(), self.names)

    @classmethod
    def from_entries(
        cls, header: R2RHeader, entries: list[R2REntry] | list[tuple[int, int, str]]
    ) -> R2RPerfMap:
        """Build a map (crossgen2 style) from (rva, length, name) triples."""
        rvas = np.array([e[0] for e in entries], dtype=np.uint64)
        lengths = np.array([e[1] for e in entries], dtype=np.uint64)
        return cls(header, rvas, lengths, [e[2] for e in entries])


def read_r2rmap(data: bytes, *, path: str | None = None, strict: bool = True) -> R2RPerfMap:
    """Parse r2rmap bytes. ``strict=False`` skips broken lines (see ``skipped``)."""
    if strict:
        _check_utf8(data, path)
    parsed = parse_lines(
        data, path=path, strict=strict, max_start=U32_MAX, max_size=U32_MAX, start_what="RVA"
    )
    parsed.style = _prefer_crossgen2(parsed.style, parsed.starts[:1000], parsed.sizes[:1000])
    starts = parsed.starts
    n_head = 0
    while n_head < len(starts) and int(starts[n_head]) >= HEADER_TOKEN_MIN:
        n_head += 1
    records = tuple(
        HeaderRecord(int(starts[i]), int(parsed.sizes[i]), parsed.names[i]) for i in range(n_head)
    )
    body = starts[n_head:]
    late = np.flatnonzero(body >= HEADER_TOKEN_MIN)
    rvas, lengths, names = body, parsed.sizes[n_head:], parsed.names[n_head:]
    skipped = list(parsed.skipped)
    if len(late):
        first = int(late[0]) + n_head
        if strict:
            raise PerfMapFormatError(
                "malformed",
                f"header record {int(starts[first]):08X} after the method entries",
                path=path,
                line=parsed.line_of(first),
            )
        keep = body < HEADER_TOKEN_MIN
        skipped += [(parsed.line_of(int(i) + n_head), "late header record") for i in late]
        rvas, lengths = rvas[keep], lengths[keep]
        names = [n for n, k in zip(names, keep.tolist(), strict=True) if k]
    return R2RPerfMap(R2RHeader(records), rvas, lengths, names, parsed.style, skipped)


def _prefer_crossgen2(style: LineStyle, starts: np.ndarray, sizes: np.ndarray) -> LineStyle:
    """Settle what the sampled lines leave open, without changing how any of them renders.

    A column with no hex letters takes the other column's case (one writer uses one case:
    crossgen2 upper, crossgen1 lower), or crossgen2's upper case if neither shows letters;
    an upper-case (crossgen2) map without visible zero padding gets ``%08X %02X`` widths
    when every sampled token is at least that long anyway.
    """
    lettered = {
        column: any(c in "abcdef" for v in values.tolist() for c in format(v, "x"))
        for column, values in (("address", starts), ("size", sizes))
    }
    upper = {"address": style.address_upper, "size": style.size_upper}
    for column, other in (("address", "size"), ("size", "address")):
        if not lettered[column]:
            upper[column] = upper[other] if lettered[other] else True
    widths = {"address": style.address_width, "size": style.size_width}
    if upper["address"] and upper["size"]:
        for column, values, width in (("address", starts, 8), ("size", sizes, 2)):
            if widths[column] == 0 and all(len(format(v, "x")) >= width for v in values.tolist()):
                widths[column] = width
    return dataclasses.replace(
        style,
        address_upper=upper["address"],
        size_upper=upper["size"],
        address_width=widths["address"],
        size_width=widths["size"],
    )


def _check_utf8(data: bytes, path: str | None) -> None:
    """r2rmaps are UTF-8 by definition (crossgen2 writes UTF-8): other bytes mean damage."""
    if data.isascii():  # the usual case, ~10x cheaper than a full decode
        return
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        bad = data[exc.start : exc.start + 1].hex()
        raise PerfMapFormatError(
            "malformed",
            f"byte 0x{bad} is not valid UTF-8 (an r2rmap is UTF-8 text)",
            path=path,
            line=line,
        ) from None


def write_r2rmap(perfmap: R2RPerfMap) -> bytes:
    """Render a map in its :attr:`~R2RPerfMap.style` (crossgen2's ``%08X %02X name``)."""
    style = perfmap.style
    fmt = style.line_format().format
    head = [fmt(r.token, r.length, r.value) for r in perfmap.header.records]
    return render_lines(perfmap.rvas, perfmap.lengths, perfmap.names, style, head=head)


def load_r2rmap(path: str, *, strict: bool = True) -> R2RPerfMap:
    """Read an r2rmap file (``-`` is stdin)."""
    return read_r2rmap(read_input(path, PerfMapFormatError), path=path, strict=strict)


def save_r2rmap(perfmap: R2RPerfMap, path: str) -> None:
    """Write atomically (temp file in the same directory, then rename)."""
    write_atomic(path, write_r2rmap(perfmap))


def looks_like_r2rmap(data: bytes, name: str = "") -> bool:
    """Sniff: a header line first, or an r2rmap-style file name (v1 or v0, spec §1.2)."""
    if data[:9].upper() in (b"FFFFFFFF ", b"FFFFFFFF\t"):
        return True
    return parse_r2rmap_file_name(name) is not None


class R2RMapFileName(NamedTuple):
    """What a map's file name says: base name, naming version, MVID (v0) or composite."""

    base: str
    version: int
    mvid: uuid.UUID | None
    composite: bool


_V0_NAME = re.compile(r"(?P<base>.+)\.ni\.\{(?P<mvid>[0-9A-Fa-f-]{36}|composite)\}\.map")


def parse_r2rmap_file_name(name: str) -> R2RMapFileName | None:
    """Decode ``X.ni.r2rmap`` (v1) or ``X.ni.{mvid}.map`` / ``X.ni.{composite}.map`` (v0)."""
    base = name.replace("\\", "/").rsplit("/", 1)[-1]
    if base.endswith(".ni.r2rmap"):
        return R2RMapFileName(base[: -len(".ni.r2rmap")], 1, None, False)
    if base.endswith(".r2rmap"):  # R2RDump's default name (spec §1.1)
        return R2RMapFileName(base[: -len(".r2rmap")], 1, None, False)
    m = _V0_NAME.fullmatch(base)
    if m is None:
        return None
    text = m.group("mvid")
    if text == "composite":
        return R2RMapFileName(m.group("base"), 0, None, True)
    try:
        return R2RMapFileName(m.group("base"), 0, uuid.UUID(text), False)
    except ValueError:
        return None


def r2rmap_file_name(
    base: str, *, version: int = 1, mvid: uuid.UUID | None = None, composite: bool = False
) -> str:
    """The name crossgen2 gives a map: ``X.ni.r2rmap`` (v1) or ``X.ni.{mvid}.map`` (v0)."""
    if version >= 1:
        return f"{base}.ni.r2rmap"
    if composite:
        return f"{base}.ni.{{composite}}.map"
    if mvid is None:
        raise ValueError("a v0 map name needs the assembly MVID")
    return f"{base}.ni.{{{mvid}}}.map"
