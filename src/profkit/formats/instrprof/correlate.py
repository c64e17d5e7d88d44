"""Raw profiles written for binary correlation, read together with their binary (#16).

``clang -fprofile-generate -mllvm -profile-correlate=binary`` (LLVM 18+) writes raw files
holding only counters: the per-function data records and the names stay in the
executable, in the non-allocated sections ``__llvm_covdata`` and ``__llvm_covnames``, and
``llvm-profdata merge --binary-file=BIN`` joins the two. A record's ``CounterPtr`` is
the absolute address of its counters in ``__llvm_prf_cnts``, so its counters are the raw
file's counter section at ``CounterPtr - addr(__llvm_prf_cnts)``
(``BinaryInstrProfCorrelator::correlateProfileDataImpl``; LLVM skips, with a warning,
records whose pointer falls outside the section).

llvm-profdata checks nothing else: a raw file from another build silently puts counts
on the wrong functions. We refuse a binary that cannot be the one: a different ELF class
or byte order, a counter section of another size than the raw file's, a build ID the
raw file does not carry. The ELF is read with pyelftools (``pip install pyelftools``).

Debug-info correlation (``-profile-correlate=debug-info``; LLVM 14-16's
``-debug-info-correlate``) keeps the same facts in DWARF instead: one ``__profc_<fn>``
variable per function, its address the counters', with ``DW_TAG_LLVM_annotation``
children "Function Name", "CFG Hash" and "Num Counters" (``DwarfInstrProfCorrelator``).
"""

from __future__ import annotations

import os
import stat
import struct
from collections.abc import Callable
from typing import Any, NamedTuple

from profkit.errors import ProfileFormatError, UsageError
from profkit.formats._binary import Cursor
from profkit.formats.instrprof.magics import RAW_MAGICS
from profkit.formats.instrprof.model import FunctionRecord, Profile
from profkit.formats.instrprof.names import add_names, decode_names
from profkit.formats.instrprof.raw_sections import locate

DATA_SECTION = "__llvm_covdata"
NAMES_SECTION = "__llvm_covnames"
COUNTERS_SECTION = "__llvm_prf_cnts"


class Correlation(NamedTuple):
    """Where the records of correlation raw files are: ``mode`` ``binary`` or ``debug-info``."""

    mode: str
    path: str


#: One function's probe: (name, CFG hash, counter address, number of counters).
Probe = tuple[str, int, int, int]


class _Binary:
    """What correlation needs from an ELF executable, in ``binary`` or ``debug-info`` mode."""

    def __init__(self, path: str, mode: str = "binary") -> None:
        flag = "--binary-file" if mode == "binary" else "--debug-info"
        try:
            from elftools.common.exceptions import DWARFError, ELFError
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
        self.data = self.names = b""
        self.probes: list[Probe] = []
        try:
            with open(path, "rb") as fh:
                elf = ELFFile(fh)
                self.psize = 8 if elf.elfclass == 64 else 4
                self.order = "<" if elf.little_endian else ">"
                wanted = (DATA_SECTION, NAMES_SECTION) if mode == "binary" else ()
                sections = {}
                for name in (*wanted, COUNTERS_SECTION):
                    sec = elf.get_section_by_name(name)
                    if sec is None:
                        raise ProfileFormatError(
                            "incompatible",
                            f"has no {name} section: not built with "
                            f"-mllvm -profile-correlate={mode}",
                            path=path,
                        )
                    sections[name] = sec
                if mode == "binary":
                    self.data = bytes(sections[DATA_SECTION].data())
                    self.names = bytes(sections[NAMES_SECTION].data())
                else:
                    if not elf.has_dwarf_info():
                        raise ProfileFormatError(
                            "incompatible", "has no DWARF: not built with -g", path=path
                        )
                    self.probes = _dwarf_probes(elf)
                counters = sections[COUNTERS_SECTION]
                self.counters_start = int(counters["sh_addr"])
                self.counters_size = int(counters["sh_size"])
                self.build_ids = _build_ids(elf)
        except (ELFError, DWARFError) as exc:
            raise ProfileFormatError(
                "malformed", f"cannot read the ELF/DWARF: {exc}", path=path
            ) from None


#: ``DW_TAG_LLVM_annotation`` (pyelftools may not know its name).
_ANNOTATION_TAGS = ("DW_TAG_LLVM_annotation", 0x6000)
_DW_OP_ADDR, _DW_OP_ADDRX = 0x03, 0xA1


def _dwarf_probes(elf: Any) -> list[Probe]:
    """``DwarfInstrProfCorrelator``: every ``__profc_*`` variable with its annotations
    ("Function Name", "CFG Hash", "Num Counters") and its address, in DIE order."""
    dwarf = elf.get_dwarf_info()
    probes: list[Probe] = []
    for cu in dwarf.iter_CUs():
        for die in cu.iter_DIEs():
            if die.tag != "DW_TAG_variable":
                continue
            name = die.attributes.get("DW_AT_name")
            if name is None or not bytes(name.value).startswith(b"__profc_"):
                continue
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
                continue  # LLVM warns "incomplete DIE" and skips it
            text = fn.decode("utf-8", "surrogateescape") if isinstance(fn, bytes) else str(fn)
            probes.append((text, int(cfg), address, int(num)))
    return probes


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


def _build_ids(elf: object) -> list[bytes]:
    out = []
    for section in elf.iter_sections():  # type: ignore[attr-defined]
        if section["sh_type"] != "SHT_NOTE":
            continue
        for note in section.iter_notes():
            if note["n_type"] == "NT_GNU_BUILD_ID":
                out.append(bytes.fromhex(note["n_desc"]))
    return out


def correlate_binary(
    raw: bytes,
    raw_path: str,
    binary_path: str,
    warn: Callable[[str], None] | None = None,
) -> Profile:
    """The profile of a binary-correlation raw file, records and names taken from the binary."""
    return correlate(raw, raw_path, binary_path, "binary", warn)


def correlate(
    raw: bytes,
    raw_path: str,
    binary_path: str,
    mode: str,
    warn: Callable[[str], None] | None = None,
) -> Profile:
    """A correlation raw file read with its binary: ``mode`` is ``binary`` (the
    ``__llvm_covdata``/``__llvm_covnames`` sections) or ``debug-info`` (DWARF)."""
    layout = RAW_MAGICS.get(bytes(raw[:8]))
    if layout is None:
        raise ProfileFormatError("bad_magic", "not a raw profile", path=raw_path, offset=0)
    order, psize = layout
    cur = Cursor(raw, path=raw_path, error=ProfileFormatError)
    where = locate(cur, order, psize)
    binary = _Binary(binary_path, mode)
    mismatch = f"{binary_path} is not the binary that wrote {raw_path}"
    if (binary.order, binary.psize) != (order, psize):
        raise ProfileFormatError(
            "incompatible", f"{mismatch}: ELF class or byte order differs", path=binary_path
        )
    num_counters = where.header["num_counters"]
    if binary.counters_size != num_counters * 8:
        raise ProfileFormatError(
            "incompatible",
            f"{mismatch}: its counter section holds {binary.counters_size // 8} counters, "
            f"the raw file {num_counters}",
            path=binary_path,
        )
    ids = _raw_binary_ids(raw, where.binary_ids, order)
    if ids and binary.build_ids and not set(ids) & set(binary.build_ids):
        raise ProfileFormatError(
            "incompatible",
            f"{mismatch}: build ID {binary.build_ids[0].hex()}, the raw file has "
            f"{', '.join(i.hex() for i in ids)}",
            path=binary_path,
        )
    probes = _section_probes(binary, where.record) if mode == "binary" else binary.probes
    counters = raw[where.counters[0] : where.counters[1]]
    profile = Profile(kind=where.kind, format="raw", version=where.version)
    profile.version_word = where.word
    profile.binary_ids.extend(ids)
    for index, (name, cfg_hash, address, n) in enumerate(probes):
        offset = address - binary.counters_start
        if not 0 <= offset < binary.counters_size or offset + 8 * n > binary.counters_size:
            if warn is not None:  # as LLVM: "could not find a valid counter pointer"
                warn(f"{binary_path}: probe {index} ({name}): counters outside {COUNTERS_SECTION}")
            continue
        counts = list(struct.unpack_from(f"{order}{n}Q", counters, offset))
        profile.records.append(FunctionRecord(name, cfg_hash, counts, b""))
    add_names(profile.symtab, [r.name for r in profile.records])
    return profile


def _section_probes(binary: _Binary, rec: Any) -> list[Probe]:
    """The data records of ``__llvm_covdata`` as probes, names from ``__llvm_covnames``."""
    # The last record may lack its tail padding (LLVM iterates with `<`): pad it.
    data = binary.data + bytes(-len(binary.data) % rec.size)
    symtab: dict[int, str] = {}
    names_cur = Cursor(binary.names, path=binary.path, error=ProfileFormatError)
    add_names(symtab, decode_names(names_cur, len(binary.names), NAMES_SECTION))
    i_name, i_hash = rec.pos("name_ref"), rec.pos("func_hash")
    i_cptr, i_nc = rec.pos("counter_ptr"), rec.pos("num_counters")
    probes: list[Probe] = []
    for index, values in enumerate(rec.struct.iter_unpack(data)):
        name = symtab.get(values[i_name])
        if name is None:
            raise ProfileFormatError(
                "malformed",
                f"record {index}: name hash 0x{values[i_name]:016x} is not in {NAMES_SECTION}",
                path=binary.path,
                offset=index * rec.size,
            )
        probes.append((name, values[i_hash], values[i_cptr], values[i_nc]))
    return probes


def _raw_binary_ids(raw: bytes, span: tuple[int, int], order: str) -> list[bytes]:
    ids = Cursor(raw, *span, error=ProfileFormatError)
    out = []
    while ids.remaining:
        n = ids.u64("binary ID length", order)
        out.append(bytes(ids.take(n, "binary ID")))
        ids.align(8, "binary ID padding")
    return out
