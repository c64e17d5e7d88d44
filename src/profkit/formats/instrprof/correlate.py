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
Debug-info correlation (``--debug-info``) is not implemented.
"""

from __future__ import annotations

import os
import stat
import struct
from collections.abc import Callable

from profkit.errors import ProfileFormatError, UsageError
from profkit.formats._binary import Cursor
from profkit.formats.instrprof.magics import RAW_MAGICS
from profkit.formats.instrprof.model import FunctionRecord, Profile
from profkit.formats.instrprof.names import add_names, decode_names
from profkit.formats.instrprof.raw_sections import locate

DATA_SECTION = "__llvm_covdata"
NAMES_SECTION = "__llvm_covnames"
COUNTERS_SECTION = "__llvm_prf_cnts"
INSTALL_HINT = "--binary-file needs pyelftools: pip install pyelftools"


class _Binary:
    """What correlation needs from an ELF executable."""

    def __init__(self, path: str) -> None:
        try:
            from elftools.common.exceptions import ELFError
            from elftools.elf.elffile import ELFFile
        except ImportError:
            raise UsageError(INSTALL_HINT) from None
        try:
            st = os.stat(path)
        except OSError as exc:
            raise UsageError(f"--binary-file {path}: {exc.strerror or exc}") from None
        if not stat.S_ISREG(st.st_mode):
            raise UsageError(f"--binary-file {path}: not a regular file")
        self.path = path
        try:
            with open(path, "rb") as fh:
                elf = ELFFile(fh)
                self.psize = 8 if elf.elfclass == 64 else 4
                self.order = "<" if elf.little_endian else ">"
                sections = {}
                for name in (DATA_SECTION, NAMES_SECTION, COUNTERS_SECTION):
                    sec = elf.get_section_by_name(name)
                    if sec is None:
                        raise ProfileFormatError(
                            "incompatible",
                            f"has no {name} section: not built with "
                            "-mllvm -profile-correlate=binary",
                            path=path,
                        )
                    sections[name] = sec
                self.data = bytes(sections[DATA_SECTION].data())
                self.names = bytes(sections[NAMES_SECTION].data())
                counters = sections[COUNTERS_SECTION]
                self.counters_start = int(counters["sh_addr"])
                self.counters_size = int(counters["sh_size"])
                self.build_ids = _build_ids(elf)
        except ELFError as exc:
            raise ProfileFormatError("bad_magic", f"not an ELF binary: {exc}", path=path) from None


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
    layout = RAW_MAGICS.get(bytes(raw[:8]))
    if layout is None:
        raise ProfileFormatError("bad_magic", "not a raw profile", path=raw_path, offset=0)
    order, psize = layout
    cur = Cursor(raw, path=raw_path, error=ProfileFormatError)
    where = locate(cur, order, psize)
    binary = _Binary(binary_path)
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
    rec = where.record
    # The last record may lack its tail padding (LLVM iterates with `<`): pad it.
    data = binary.data + bytes(-len(binary.data) % rec.size)
    symtab: dict[int, str] = {}
    names_cur = Cursor(binary.names, path=binary_path, error=ProfileFormatError)
    add_names(symtab, decode_names(names_cur, len(binary.names), NAMES_SECTION))
    counters = raw[where.counters[0] : where.counters[1]]
    i_name, i_hash = rec.pos("name_ref"), rec.pos("func_hash")
    i_cptr, i_nc = rec.pos("counter_ptr"), rec.pos("num_counters")
    profile = Profile(kind=where.kind, format="raw", version=where.version)
    profile.version_word = where.word
    profile.symtab.update(symtab)
    profile.binary_ids.extend(ids)
    for index, values in enumerate(rec.struct.iter_unpack(data)):
        offset = values[i_cptr] - binary.counters_start
        n = values[i_nc]
        if not 0 <= offset < binary.counters_size or offset + 8 * n > binary.counters_size:
            if warn is not None:  # as LLVM: "could not find a valid counter pointer"
                warn(f"{binary_path}: record {index}: counter pointer outside {COUNTERS_SECTION}")
            continue
        name = symtab.get(values[i_name])
        if name is None:
            raise ProfileFormatError(
                "malformed",
                f"record {index}: name hash 0x{values[i_name]:016x} is not in {NAMES_SECTION}",
                path=binary_path,
                offset=index * rec.size,
            )
        counts = list(struct.unpack_from(f"{order}{n}Q", counters, offset))
        profile.records.append(FunctionRecord(name, values[i_hash], counts, b""))
    return profile


def _raw_binary_ids(raw: bytes, span: tuple[int, int], order: str) -> list[bytes]:
    ids = Cursor(raw, *span, error=ProfileFormatError)
    out = []
    while ids.remaining:
        n = ids.u64("binary ID length", order)
        out.append(bytes(ids.take(n, "binary ID")))
        ids.align(8, "binary ID padding")
    return out
