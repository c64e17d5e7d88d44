"""The few PE/COFF and ECMA-335 structures needed to tie an r2rmap to its R2R image.

We read: the COFF header (machine), the optional header's data directories, the section
table (RVA → file offset), the debug directory and its type-21 "R2R PerfMap" entry
(magic ``R2RM``, signature, version, file name; spec §1.9), and — to recompute the
signature from the image itself — the CLI header, the metadata root, the ``#~`` Module
row and the ``#GUID`` heap (the MVID).

Why not ``pefile``: it would be a new runtime dependency for ~200 lines of fixed
layouts, it does not parse ECMA-335 metadata (so the MVID part would be ours anyway),
and it is lenient by design (it records warnings and carries on), while our readers must
fail with one error naming the offset. Every size and count read from the file is
checked against the bytes that remain before it is used (:class:`Cursor`).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, NamedTuple

from profkit.errors import FormatError
from profkit.formats._binary import Cursor

IMAGE_DEBUG_TYPE_CODEVIEW = 2
IMAGE_DEBUG_TYPE_REPRO = 16
IMAGE_DEBUG_TYPE_R2R_PERFMAP = 21
PERFMAP_MAGIC = 0x4D523252  # "R2RM"
_DEBUG_DIR_INDEX = 6
_CLI_DIR_INDEX = 14
_DEBUG_ENTRY = "<IIHHIIII"
_SECTION = "<8sIIIIIIHHI"
_MAX_SECTIONS = 96  # the PE/COFF spec's limit; more means a damaged header

#: R2R images XOR the machine with an OS value (ReadyToRun format doc, "Machine").
_OS_XOR = {0: "Windows", 0x7B79: "Linux", 0x4644: "OSX", 0xADC4: "FreeBSD", 0x1993: "NetBSD",
           0x1992: "SunOS"}  # fmt: skip
_MACHINES = {0x014C: "X86", 0x8664: "X64", 0x01C4: "ARM", 0xAA64: "ARM64", 0x5064: "RiscV64",
             0x6264: "LoongArch64"}  # fmt: skip


class Section(NamedTuple):
    name: str
    virtual_address: int
    virtual_size: int
    raw_size: int
    raw_pointer: int


class DebugEntry(NamedTuple):
    """One ``IMAGE_DEBUG_DIRECTORY`` record."""

    major_version: int
    minor_version: int
    type: int
    size: int
    rva: int
    pointer: int


class PerfMapDebugInfo(NamedTuple):
    """The type-21 payload: what map this image expects (matched by signature)."""

    signature: bytes
    version: int
    file_name: str


@dataclass
class PEImage:
    """The parsed parts of one PE file (the bytes are kept for lazy lookups)."""

    data: bytes
    path: str | None
    machine: int
    sections: list[Section]
    directories: list[tuple[int, int]]
    debug_entries: list[DebugEntry]
    #: file offset of the first data directory (so errors can point at an RVA's source)
    directory_offset: int = 0

    def machine_description(self) -> str:
        """e.g. ``X64/Linux`` — R2R images XOR an OS value into the machine field."""
        for xor, os_name in _OS_XOR.items():
            arch = _MACHINES.get(self.machine ^ xor)
            if arch is not None:
                return f"{arch}/{os_name}"
        return f"unknown machine 0x{self.machine:04x}"

    def rva_to_offset(self, rva: int, size: int, what: str, at: int | None = None) -> int:
        """File offset of ``size`` bytes at ``rva``; FormatError if they are not in the file
        (naming ``at``, the offset the RVA was read from, when given)."""
        for s in self.sections:
            if s.virtual_address <= rva and rva + size <= s.virtual_address + s.raw_size:
                return s.raw_pointer + rva - s.virtual_address
        raise FormatError(
            "malformed",
            f"{what}: RVA 0x{rva:x} (+{size}) is in no section",
            path=self.path,
            offset=at,
        )

    def perfmap_info(self) -> PerfMapDebugInfo | None:
        """The R2R PerfMap debug entry (type 21), or None if the image has none."""
        for entry in self.debug_entries:
            if entry.type == IMAGE_DEBUG_TYPE_R2R_PERFMAP:
                return _read_perfmap_payload(self, entry)
        return None

    def mvid(self) -> uuid.UUID | None:
        """The module's MVID from its ECMA-335 metadata, or None without a CLI header."""
        raw = self.mvid_bytes()
        return None if raw is None else uuid.UUID(bytes_le=raw)

    def mvid_bytes(self) -> bytes | None:
        """The MVID's 16 bytes as stored (= .NET ``Guid.ToByteArray()``)."""
        rva, size = self.directories[_CLI_DIR_INDEX] if len(self.directories) > 14 else (0, 0)
        if not rva or not size:
            return None
        return _read_mvid(self, rva)


def _cursor(data: bytes, path: str | None, pos: int = 0) -> Cursor:
    return Cursor(data, pos, path=path, error=FormatError)


def read_pe(data: bytes, *, path: str | None = None) -> PEImage:
    """Parse the headers, section table and debug directory of a PE image."""
    cur = _cursor(data, path)
    if cur.take(2, "DOS signature").tobytes() != b"MZ":
        raise cur.fail("bad_magic", "not a PE image (no 'MZ' signature)", 0)
    cur.pos = 0x3C
    e_lfanew = cur.u32("e_lfanew")
    cur = _cursor(data, path, e_lfanew)
    cur.need(4, "PE signature")
    if cur.take(4, "PE signature").tobytes() != b"PE\0\0":
        raise cur.fail("bad_magic", "no 'PE\\0\\0' signature at e_lfanew", e_lfanew)
    machine, n_sections, _, _, _, opt_size, _ = cur.unpack("<HHIIIHH", "COFF header")
    if n_sections > _MAX_SECTIONS:
        raise cur.fail("too_large", f"{n_sections} sections (PE allows {_MAX_SECTIONS})")
    opt = cur.sub(opt_size, "optional header")
    magic = opt.unpack("<H", "optional header magic")[0]
    if magic not in (0x10B, 0x20B):
        raise opt.fail("bad_magic", f"optional header magic 0x{magic:x} is neither PE32 nor PE32+")
    opt.pos += 92 - 2 if magic == 0x10B else 108 - 2
    n_dirs = opt.u32("NumberOfRvaAndSizes")
    opt.check_count(n_dirs, 8, "data directories")
    directory_offset = opt.pos
    directories: list[tuple[int, int]] = []
    for _ in range(n_dirs):
        d_rva, d_size = opt.unpack("<II", "data directory")
        directories.append((d_rva, d_size))
    cur.check_count(n_sections, 40, "section table")
    sections = []
    for _ in range(n_sections):
        fields: tuple[Any, ...] = cur.unpack(_SECTION, "section header")
        name = fields[0].rstrip(b"\0").decode("latin-1")
        vsize, va, raw_size, raw_ptr = fields[1:5]
        if raw_ptr + raw_size > len(data):
            raise cur.fail("truncated", f"section {name!r} data runs past the end of the file")
        sections.append(Section(name, va, vsize, raw_size, raw_ptr))
    image = PEImage(data, path, machine, sections, directories, [], directory_offset)
    image.debug_entries = _read_debug_directory(image)
    return image


def _read_debug_directory(image: PEImage) -> list[DebugEntry]:
    if len(image.directories) <= _DEBUG_DIR_INDEX:
        return []
    rva, size = image.directories[_DEBUG_DIR_INDEX]
    if not rva or not size:
        return []
    at = image.directory_offset + 8 * _DEBUG_DIR_INDEX
    offset = image.rva_to_offset(rva, size, "debug directory", at)
    cur = _cursor(image.data, image.path, offset)
    entries = []
    for _ in range(size // 28):
        _, _, major, minor, kind, dsize, drva, dptr = cur.unpack(_DEBUG_ENTRY, "debug entry")
        entries.append(DebugEntry(major, minor, kind, dsize, drva, dptr))
    return entries


def _read_perfmap_payload(image: PEImage, entry: DebugEntry) -> PerfMapDebugInfo:
    cur = _cursor(image.data, image.path, entry.pointer)
    payload = cur.sub(entry.size, "R2R PerfMap debug entry")
    magic = payload.u32("PerfMap magic")
    if magic != PERFMAP_MAGIC:
        raise payload.fail("bad_magic", f"PerfMap entry magic 0x{magic:08x}, expected 'R2RM'")
    signature = payload.take(16, "PerfMap signature").tobytes()
    version = payload.u32("PerfMap version")
    rest = payload.take(payload.remaining, "PerfMap file name").tobytes()
    name, nul, _ = rest.partition(b"\0")
    if not nul:
        raise payload.fail("malformed", "PerfMap file name is not NUL-terminated")
    try:
        file_name = name.decode("utf-8")
    except UnicodeDecodeError:
        raise payload.fail("malformed", "PerfMap file name is not UTF-8") from None
    return PerfMapDebugInfo(signature, version, file_name)


def _read_mvid(image: PEImage, cli_rva: int) -> bytes | None:
    cli = _cursor(image.data, image.path, image.rva_to_offset(cli_rva, 16, "CLI header"))
    cli.pos += 8  # cb, MajorRuntimeVersion, MinorRuntimeVersion
    md_rva, md_size = cli.unpack("<II", "metadata directory")
    md_off = image.rva_to_offset(md_rva, md_size, "metadata")
    root = Cursor(image.data, md_off, md_off + md_size, path=image.path, error=FormatError)
    if root.u32("metadata signature") != 0x424A5342:
        raise root.fail("bad_magic", "metadata root signature is not 'BSJB'", md_off)
    root.pos += 8  # major, minor, reserved
    version_len = root.u32("metadata version length")
    root.skip(version_len, "metadata version string")
    root.pos += 2  # flags
    n_streams = root.unpack("<H", "stream count")[0]
    root.check_count(n_streams, 12, "stream headers")
    streams: dict[str, tuple[int, int]] = {}
    for _ in range(n_streams):
        s_off, s_size = root.unpack("<II", "stream header")
        raw = root.data[root.pos : min(root.end, root.pos + 32)]
        name = bytes(raw).partition(b"\0")[0]
        root.skip((len(name) + 4) // 4 * 4, "stream name")  # NUL-terminated, 4-aligned
        if s_off + s_size > md_size:
            raise root.fail("truncated", f"stream {name!r} runs past the metadata")
        streams[name.decode("latin-1")] = (md_off + s_off, s_size)
    tables = streams.get("#~") or streams.get("#-")
    guids = streams.get("#GUID")
    if tables is None or guids is None:
        return None
    tc = Cursor(image.data, tables[0], tables[0] + tables[1], path=image.path, error=FormatError)
    tc.pos += 6  # reserved, major, minor
    heap_sizes = tc.u8("HeapSizes")
    tc.pos += 1
    valid = tc.u64("Valid")
    tc.pos += 8  # Sorted
    if not valid & 1:
        return None  # no Module table
    tc.pos += 4 * bin(valid).count("1")  # row counts
    if heap_sizes & 0x40:
        tc.pos += 4  # extra data (EnC)
    tc.pos += 2 + (4 if heap_sizes & 1 else 2)  # Generation, Name
    index = tc.u32("Module.Mvid") if heap_sizes & 2 else tc.unpack("<H", "Module.Mvid")[0]
    if index == 0:
        return None
    if index * 16 > guids[1]:
        raise tc.fail("malformed", f"Module.Mvid index {index} is outside the #GUID heap")
    start = guids[0] + (index - 1) * 16
    return image.data[start : start + 16]


def load_pe(path: str) -> PEImage:
    """Read and parse a PE file."""
    from profkit.formats.perfmap._io import read_input

    return read_pe(read_input(path, FormatError), path=path)
