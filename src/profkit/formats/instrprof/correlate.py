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
raw file does not carry. The ELF is read with pyelftools (``pip install pyelftools``)
behind :mod:`~profkit.formats.instrprof.elfread`, which turns a damaged file into one error.

Debug-info correlation (``-profile-correlate=debug-info``; LLVM 14-16's
``-debug-info-correlate``) keeps the same facts in DWARF instead: one ``__profc_<fn>``
variable per function, its address the counters', with ``DW_TAG_LLVM_annotation``
children "Function Name", "CFG Hash" and "Num Counters" (``DwarfInstrProfCorrelator``).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, NamedTuple

from profkit.errors import ProfileFormatError
from profkit.formats._binary import Cursor
from profkit.formats.instrprof.elfread import (
    COUNTERS_SECTION,
    NAMES_SECTION,
    ElfBinary,
    Probe,
)
from profkit.formats.instrprof.magics import RAW_MAGICS
from profkit.formats.instrprof.model import FunctionRecord, Profile
from profkit.formats.instrprof.names import add_names, decode_names
from profkit.formats.instrprof.raw_sections import locate


class Correlation(NamedTuple):
    """Where the records of correlation raw files are: ``mode`` ``binary`` or ``debug-info``."""

    mode: str
    path: str


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
    binary = ElfBinary(binary_path, mode)
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


def _section_probes(binary: ElfBinary, rec: Any) -> list[Probe]:
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
