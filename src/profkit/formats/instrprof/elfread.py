"""The executable that correlation reads (``--binary-file`` / ``--debug-info``), through
pyelftools, with every way a damaged file can fail turned into one :class:`ProfileFormatError`.

Why a wall around pyelftools: it was written to read well-formed files. On damaged ones it
raises ``ELFError``/``DWARFError`` but also ``struct.error``, construct's errors,
``KeyError`` (an abbreviation code not in the table), ``AssertionError``, ``OSError``
(a seek to a negative offset), ``OverflowError``, and ``MemoryError`` after trying to
read a section whose ``sh_size`` says 2⁶³ bytes (issue #22 item 10: 20+ distinct errors,
all exit 70). So, before pyelftools reads anything that could be large, the section
headers are checked against the file's size (count, entry size, each section's extent,
a compressed section's claimed size against zlib's best ratio); build-ID notes are
parsed here, bounded by their section; and whatever pyelftools still raises becomes
``malformed`` with the file and the offset of what was being read when it is known.
"""

from __future__ import annotations

import os
import stat
import struct
from typing import Any

from profkit.errors import ProfileFormatError, UsageError

COUNTERS_SECTION = "__llvm_prf_cnts"
DATA_SECTION = "__llvm_covdata"
NAMES_SECTION = "__llvm_covnames"

#: One function's probe: (name, CFG hash, counter address, number of counters).
Probe = tuple[str, int, int, int]

#: zlib never inflates more than ~1032:1, so a compressed section claiming more is a lie.
_INFLATE_RATIO = 1100
_NT_GNU_BUILD_ID = 3
_SHF_COMPRESSED = 0x800
#: ``DW_TAG_LLVM_annotation`` (pyelftools may not know its name).
_ANNOTATION_TAGS = ("DW_TAG_LLVM_annotation", 0x6000)
_DW_OP_ADDR, _DW_OP_ADDRX = 0x03, 0xA1
#: What pyelftools raises on a damaged file (beyond its own ELFError/DWARFError, which
#: are added when it is imported): caught around it, never around profkit's own logic.
_DAMAGED: tuple[type[BaseException], ...] = (
    struct.error,
    ValueError,  # UnicodeDecodeError too
    IndexError,
    KeyError,
    TypeError,
    AttributeError,
    AssertionError,
    OverflowError,
    ZeroDivisionError,
    EOFError,
    OSError,
    MemoryError,
    RecursionError,
)


class ElfBinary:
    """What correlation needs from an ELF executable, in ``binary`` or ``debug-info`` mode."""

    def __init__(self, path: str, mode: str = "binary") -> None:
        flag = "--binary-file" if mode == "binary" else "--debug-info"
        try:
            from elftools.common.exceptions import DWARFError, ELFError
            from elftools.construct import ConstructError
            from elftools.elf.elffile import ELFFile
        except ImportError:
            raise UsageError(f"{flag} needs pyelftools: pip install pyelftools") from None
        try:
            st = os.stat(path)
        except OSError as exc:
            raise UsageError(f"{flag} {path}: {exc.strerror or exc}") from None
        if not stat.S_ISREG(st.st_mode):
            raise UsageError(f"{flag} {path}: not a regular file")
        self.path = path
        self.size = st.st_size
        self.data = self.names = b""
        self.probes: list[Probe] = []
        #: file offset of what is being read (named in an error pyelftools raises)
        self.at: int | None = 0
        damaged: tuple[type[BaseException], ...] = (ELFError, DWARFError, ConstructError, *_DAMAGED)
        try:
            with open(path, "rb") as fh:
                self._read(ELFFile(fh), mode)
        except ProfileFormatError:
            raise
        except damaged as exc:
            detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            raise ProfileFormatError(
                "malformed",
                f"cannot read the ELF/DWARF ({detail[:200]})",
                path=path,
                offset=self.at,
            ) from None

    def _read(self, elf: Any, mode: str) -> None:
        self.psize = 8 if elf.elfclass == 64 else 4
        self.order = "<" if elf.little_endian else ">"
        self._check_sections(elf)
        wanted = (DATA_SECTION, NAMES_SECTION) if mode == "binary" else ()
        sections = {}
        for name in (*wanted, COUNTERS_SECTION):
            self.at = None
            sec = elf.get_section_by_name(name)
            if sec is None:
                raise ProfileFormatError(
                    "incompatible",
                    f"has no {name} section: not built with -mllvm -profile-correlate={mode}",
                    path=self.path,
                )
            sections[name] = sec
        if mode == "binary":
            self.data = self._section_data(sections[DATA_SECTION])
            self.names = self._section_data(sections[NAMES_SECTION])
        else:
            if not elf.has_dwarf_info():
                raise ProfileFormatError(
                    "incompatible", "has no DWARF: not built with -g", path=self.path
                )
            self.probes = self._dwarf_probes(elf)
        counters = sections[COUNTERS_SECTION]
        self.counters_start = int(counters["sh_addr"])
        self.counters_size = int(counters["sh_size"])
        self.build_ids = self._build_ids(elf)

    def _fail(self, kind: str, detail: str, offset: int | None) -> ProfileFormatError:
        return ProfileFormatError(kind, detail, path=self.path, offset=offset)  # type: ignore[arg-type]

    def _check_sections(self, elf: Any) -> None:
        """Every section header, and every section's bytes, inside the file; checked
        before pyelftools reads (and allocates) any of them."""
        shoff, entsize = int(elf["e_shoff"]), int(elf["e_shentsize"])
        self.at = 0
        count = int(elf.num_sections())  # e_shnum, or section 0's sh_size past 0xff00
        if not count:
            return
        if entsize < elf.structs.Elf_Shdr.sizeof():
            raise self._fail("malformed", f"e_shentsize {entsize} is too small", 0)
        if shoff + count * entsize > self.size:
            raise self._fail(
                "truncated",
                f"{count} section headers of {entsize} bytes at 0x{shoff:x} "
                f"run past the end of the file ({self.size} bytes)",
                shoff,
            )
        headers = []  # raw: a Section would read its name, and a compression header
        for index in range(count):
            self.at = shoff + index * entsize
            header = elf._get_section_header(index)
            offset, size = int(header["sh_offset"]), int(header["sh_size"])
            if header["sh_type"] != "SHT_NOBITS" and size and offset + size > self.size:
                raise self._fail(
                    "truncated",
                    f"section {index}: {size} bytes at 0x{offset:x} "
                    f"run past the end of the file ({self.size} bytes)",
                    self.at,
                )
            headers.append(header)
        self._check_names(elf, headers, shoff, entsize)
        for index, header in enumerate(headers):
            if not int(header["sh_flags"]) & _SHF_COMPRESSED or header["sh_type"] == "SHT_NOBITS":
                continue
            self.at = shoff + index * entsize
            sec = elf.get_section(index)
            size = int(header["sh_size"])
            if sec.compressed and sec.data_size > _INFLATE_RATIO * size + 4096:
                raise self._fail(
                    "too_large",
                    f"section {index} ({sec.name[:80]!r}): {size} compressed bytes "
                    f"claim {sec.data_size} uncompressed",
                    int(header["sh_offset"]),
                )

    def _check_names(self, elf: Any, headers: list[Any], shoff: int, entsize: int) -> None:
        """Every section's name starts inside the section-name table and ends with a NUL
        there: pyelftools reads a name 64 bytes at a time until a NUL, so one outside it
        read to the end of the file, for each section (a hostile 1 MB file: hours)."""
        self.at = 0
        strndx = int(elf.get_shstrndx())
        if not strndx:
            return  # no table: pyelftools reads names from section 0's empty one
        if strndx >= len(headers):
            raise self._fail("malformed", f"e_shstrndx {strndx}: no such section", 0)
        table = headers[strndx]
        size = 0 if table["sh_type"] == "SHT_NOBITS" else int(table["sh_size"])
        self.at = int(table["sh_offset"])
        elf.stream.seek(self.at)
        last_nul = elf.stream.read(size).rfind(b"\0")
        for index, header in enumerate(headers):
            name = int(header["sh_name"])
            if name > last_nul:
                raise self._fail(
                    "malformed",
                    f"section {index}: its name at {name} does not end inside the "
                    f"section-name table ({size} bytes)",
                    shoff + index * entsize,
                )

    def _section_data(self, sec: Any) -> bytes:
        self.at = int(sec["sh_offset"])
        return bytes(sec.data())

    def _build_ids(self, elf: Any) -> list[bytes]:
        """``NT_GNU_BUILD_ID`` descriptors of the ``GNU`` owner, in note sections (other
        owners' notes are skipped: their types mean something else)."""
        out = []
        for sec in elf.iter_sections():
            if sec["sh_type"] != "SHT_NOTE":
                continue
            align = 8 if int(sec["sh_addralign"]) == 8 else 4
            data = self._section_data(sec)
            try:
                for owner, kind, desc in _notes(data, self.order, align):
                    if owner == b"GNU" and kind == _NT_GNU_BUILD_ID:
                        out.append(desc)
            except _BadNote as exc:
                raise self._fail(
                    "malformed", str(exc), int(sec["sh_offset"]) + exc.offset
                ) from None
        return out

    def _dwarf_probes(self, elf: Any) -> list[Probe]:
        """``DwarfInstrProfCorrelator``: every ``__profc_*`` variable with its annotations
        ("Function Name", "CFG Hash", "Num Counters") and its address, in DIE order."""
        self.at = None
        dwarf = elf.get_dwarf_info()
        info = elf.get_section_by_name(".debug_info")
        base = int(info["sh_offset"]) if info is not None and not info.compressed else None
        probes: list[Probe] = []
        for cu in dwarf.iter_CUs():
            self.at = None if base is None else base + int(cu.cu_offset)
            for die in cu.iter_DIEs():
                if die.tag != "DW_TAG_variable":
                    continue
                name = die.attributes.get("DW_AT_name")
                if name is None or not bytes(name.value).startswith(b"__profc_"):
                    continue
                probe = _probe(dwarf, cu, die)
                if probe is not None:
                    probes.append(probe)
        return probes


class _BadNote(Exception):
    """A note that does not fit its section, at ``offset`` in the section."""

    def __init__(self, detail: str, offset: int) -> None:
        super().__init__(detail)
        self.offset = offset


def _notes(data: bytes, order: str, align: int) -> list[tuple[bytes, int, bytes]]:
    """``(owner, type, descriptor)`` of each note in a note section's bytes (owner without
    its NUL); descriptors and the next note start ``align``-aligned, as the gABI says."""
    out: list[tuple[bytes, int, bytes]] = []
    pos, end = 0, len(data)
    head = struct.Struct(order + "III")
    while end - pos >= head.size:
        namesz, descsz, kind = head.unpack_from(data, pos)
        name_at = pos + head.size
        desc_at = name_at + namesz
        desc_at += -desc_at % align
        if desc_at + descsz > end:
            why = f"note: a {namesz}-byte owner and {descsz}-byte descriptor run past its section"
            raise _BadNote(why, pos)
        owner = bytes(data[name_at : name_at + namesz]).rstrip(b"\0")
        out.append((owner, kind, bytes(data[desc_at : desc_at + descsz])))
        pos = desc_at + descsz
        pos += -pos % align
    return out


def _probe(dwarf: Any, cu: Any, die: Any) -> Probe | None:
    """One ``__profc_*`` variable's probe, or None when a part is missing (LLVM warns
    "incomplete DIE" and skips it)."""
    address = _address(dwarf, cu, die.attributes.get("DW_AT_location"))
    notes: dict[bytes, Any] = {}
    for child in die.iter_children():
        if child.tag in _ANNOTATION_TAGS:
            key = child.attributes.get("DW_AT_name")
            value = child.attributes.get("DW_AT_const_value")
            if key is not None and value is not None:
                notes[bytes(key.value)] = value.value
    fn, cfg, num = (notes.get(k) for k in (b"Function Name", b"CFG Hash", b"Num Counters"))
    if address is None or fn is None or cfg is None or num is None:
        return None
    text = fn.decode("utf-8", "surrogateescape") if isinstance(fn, bytes) else str(fn)
    return (text, int(cfg), address, int(num))


def _address(dwarf: Any, cu: Any, location: Any) -> int | None:
    """The address of a ``DW_OP_addr`` / ``DW_OP_addrx`` location expression."""
    if location is None or not isinstance(location.value, list) or not location.value:
        return None
    expr = bytes(location.value)
    if expr[0] == _DW_OP_ADDR:
        size = len(expr) - 1
        return (
            int.from_bytes(expr[1:], "little" if dwarf.config.little_endian else "big")
            if size in (4, 8)
            else None
        )
    if expr[0] == _DW_OP_ADDRX:
        index, shift = 0, 0
        for byte in expr[1:]:
            index |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        return int(dwarf.get_addr(cu, index))
    return None
