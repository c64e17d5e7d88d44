"""The text profile format (.proftext), writer side (spec §6.2, §7.5 item 1).

Why a module of its own: writing is the inverse concern of :mod:`.text`'s strict
reader: it reproduces what ``llvm-profdata merge --text`` prints for a chosen LLVM
release (``llvm_version``), and releases differ only in which header flags and record
parts they know. Its names are re-exported by :mod:`.text`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from profkit._atomic import write_atomic
from profkit.errors import UsageError
from profkit.formats.instrprof.hashing import name_md5
from profkit.formats.instrprof.model import FunctionRecord, Profile, ProfileKind, ValueKind
from profkit.formats.instrprof.versions import NEWEST_REPRODUCED, REPRODUCED_RELEASES

#: What LLVM writes for a value target whose name it does not know (the reader takes it back).
EXTERNAL_SYMBOL = "** External Symbol **"

#: LLVM releases whose text writer we can imitate, and the newest (the default): the
#: releases profkit reproduces (:mod:`.versions`).
TEXT_DIALECTS = REPRODUCED_RELEASES
NEWEST_DIALECT = NEWEST_REPRODUCED

_KIND_LABEL = {
    ValueKind.INDIRECT_CALL_TARGET: "IPVK_IndirectCallTarget",
    ValueKind.MEMOP_SIZE: "IPVK_MemOPSize",
    ValueKind.VTABLE_TARGET: "IPVK_VTableTarget",
}
#: Value kinds whose values are function or vtable names (MD5s of them in the model).
NAMED_KINDS = (ValueKind.INDIRECT_CALL_TARGET, ValueKind.VTABLE_TARGET)


def _check_dialect(profile: Profile, llvm_version: int) -> None:
    if llvm_version not in TEXT_DIALECTS:
        raise UsageError(f"text dialect must be one of {', '.join(map(str, TEXT_DIALECTS))}")
    if llvm_version >= 19:
        return
    if profile.kind & ProfileKind.TEMPORAL and profile.temporal_traces:
        raise UsageError(f"LLVM {llvm_version} text profiles cannot hold temporal traces")
    for record in profile.records:
        if record.bitmap:
            raise UsageError(
                f"LLVM {llvm_version} text profiles cannot hold MC/DC bitmaps ({record.name})"
            )
        if record.value_sites.get(ValueKind.VTABLE_TARGET):
            raise UsageError(
                f"LLVM {llvm_version} text profiles cannot hold vtable values ({record.name})"
            )


def _header(kind: ProfileKind, llvm_version: int) -> list[str]:
    out = []
    if kind & ProfileKind.CS_IR:
        out.append("# CSIR level Instrumentation Flag\n:csir\n")
    elif kind & ProfileKind.IR:
        out.append("# IR level Instrumentation Flag\n:ir\n")
    if kind & ProfileKind.ENTRY_FIRST:
        out.append("# Always instrument the function entry block\n:entry_first\n")
    if kind & ProfileKind.INSTR_LOOP_ENTRIES and llvm_version >= 22:
        out.append("# Always instrument the loop entry blocks\n:instrument_loop_entries\n")
    if kind & ProfileKind.SINGLE_BYTE_COVERAGE and llvm_version >= 19:
        out.append("# Instrument block coverage\n:single_byte_coverage\n")
    return out


def format_text(
    profile: Profile,
    *,
    llvm_version: int = NEWEST_DIALECT,
    names: Iterable[str] | None = None,
) -> str:
    """The profile as ``llvm-profdata-<llvm_version> merge --text`` writes it.

    Records are sorted by (name, hash). Indirect-call and vtable targets print as names
    when the name is known — as in LLVM, "known" means one of the profile's own function
    names (or ``names``, or a vtable name the profile carries) — else as
    ``** External Symbol **``.
    """
    _check_dialect(profile, llvm_version)
    known: dict[int, str] = {}
    for vtable_hash, vtable_name in profile.vtable_names.items():
        known[vtable_hash] = vtable_name
    for record in profile.records:
        known.setdefault(name_md5(record.name), record.name)
    for extra in names or ():
        known.setdefault(name_md5(extra), extra)
    out = _header(profile.kind, llvm_version)
    if profile.kind & ProfileKind.TEMPORAL and llvm_version >= 19:
        out.append(":temporal_prof_traces\n")
        out.append(f"# Num Temporal Profile Traces:\n{len(profile.temporal_traces)}\n")
        out.append(f"# Temporal Profile Trace Stream Size:\n{profile.temporal_trace_stream_size}\n")
        for trace in profile.temporal_traces:
            listed = "".join(known.get(ref, "") + "," for ref in trace.function_refs)
            out.append(f"# Weight:\n{trace.weight}\n{listed}\n")
        out.append("\n")
    for record in sorted(
        profile.records, key=lambda r: (r.name.encode("utf-8", "surrogateescape"), r.hash)
    ):
        _format_record(record, known, out)
    return "".join(out)


def _format_record(record: FunctionRecord, known: dict[int, str], out: list[str]) -> None:
    if "\n" in record.name or "\r" in record.name:
        raise UsageError(f"function name {record.name!r} cannot be written to a text profile")
    counts = "\n".join(map(str, record.counts))
    out.append(
        f"{record.name}\n# Func Hash:\n{record.hash}\n# Num Counters:\n{len(record.counts)}\n"
        f"# Counter Values:\n{counts}\n"
    )
    if record.bitmap:
        values = "".join(f"0x{byte:x}\n" for byte in record.bitmap)
        out.append(f"# Num Bitmap Bytes:\n${len(record.bitmap)}\n# Bitmap Byte Values:\n{values}\n")
    kinds = [k for k in ValueKind if record.value_sites.get(k)]
    if not kinds:
        out.append("\n")
        return
    out.append(f"# Num Value Kinds:\n{len(kinds)}\n")
    for kind in kinds:
        sites = record.value_sites[kind]
        out.append(
            f"# ValueKind = {_KIND_LABEL[kind]}:\n{int(kind)}\n# NumValueSites:\n{len(sites)}\n"
        )
        for site in sites:
            out.append(f"{len(site)}\n")
            if kind in NAMED_KINDS:
                out.extend(f"{known.get(v, EXTERNAL_SYMBOL)}:{c}\n" for v, c in site)
            else:
                out.extend(f"{v}:{c}\n" for v, c in site)
    out.append("\n")


def write_text(
    profile: Profile, path: str | os.PathLike[str], *, llvm_version: int = NEWEST_DIALECT
) -> None:
    """Write :func:`format_text` output to ``path`` atomically (temp file + rename)."""
    data = format_text(profile, llvm_version=llvm_version).encode("utf-8", "surrogateescape")
    write_atomic(path, data)
