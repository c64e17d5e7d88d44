"""A test-side writer of small ReadyToRun images (no crossgen2 here).

Builds, from readytorun-format.md and ECMA-335 alone, the structures the reader walks:
PE32+ headers with one section, a CLI header + metadata (Module, TypeDef, MethodDef,
Assembly, AssemblyRef tables; #Strings, #GUID, #Blob), the READYTORUN_HEADER, runtime
functions (x64 12-byte or ARM64 8-byte with packed unwind data), MethodDefEntryPoints,
InstanceMethodEntryPoints, a HotColdMap, and for composite images the RTR_HEADER export,
ComponentAssemblies, ManifestMetadata and ManifestAssemblyMvids. It exists to reach the
paths the framework images of CoreCLR 3.1 do not have (composite, hot/cold, ARM64).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from ._encode import enc_compressed, enc_hashtable, enc_native_array, enc_unsigned

TEXT_RVA = 0x1000
FILE_ALIGN = 0x200
LINUX = 0x7B79
X64, ARM64 = 0x8664, 0xAA64


@dataclass
class Method:
    name: str
    sig: bytes  # MethodDefSig blob
    code: int  # bytes of hot code
    funclet: int = 0  # bytes of a funclet right after it (second runtime function)
    cold: int = 0  # bytes of a cold part (R2R 8.0 hot/cold map)
    methoddef_entry: bool = True  # False: reachable only as an instance entry point


@dataclass
class TypeDef:
    namespace: str
    name: str
    methods: list[Method]
    enclosing: int = 0  # 1-based TypeDef row of the enclosing type (NestedClass)


@dataclass
class Assembly:
    name: str
    mvid: bytes
    types: list[TypeDef]
    refs: list[str] = field(default_factory=list)


def _strings(values: list[str]) -> tuple[bytes, dict[str, int]]:
    heap = bytearray(b"\0")
    index: dict[str, int] = {"": 0}
    for v in values:
        if v not in index:
            index[v] = len(heap)
            heap += v.encode() + b"\0"
    return bytes(heap), index


def _pad4(b: bytes) -> bytes:
    return b + b"\0" * (-len(b) % 4)


def metadata(asm: Assembly | None, refs: list[str] = ()) -> bytes:  # type: ignore[assignment]
    """A metadata root with the given assembly (or only AssemblyRefs: a manifest)."""
    names: list[str] = []
    if asm is not None:
        names += [asm.name + ".dll", asm.name]
        for t in asm.types:
            names += [t.namespace, t.name] + [m.name for m in t.methods]
    names += list(refs)
    strings, sidx = _strings(names)
    blob = bytearray(b"\0")
    guid = bytearray()
    tables: dict[int, list[bytes]] = {}
    if asm is not None:
        guid += asm.mvid
        tables[0x00] = [struct.pack("<HHHHH", 0, sidx[asm.name + ".dll"], 1, 0, 0)]
        typedefs, methoddefs, nested = [], [], []
        # row 1 is <Module>, as compilers write it
        typedefs.append(struct.pack("<IHHHHH", 0, 0, 0, 0, 1, 1))
        next_method = 1
        for row, t in enumerate(asm.types, start=2):
            typedefs.append(struct.pack("<IHHHHH", 0x100001, sidx[t.name], sidx[t.namespace],
                                        0, 1, next_method))  # fmt: skip
            if t.enclosing:
                nested.append(struct.pack("<HH", row, t.enclosing + 1))
            for m in t.methods:
                at = len(blob)
                blob += enc_compressed(len(m.sig)) + m.sig
                methoddefs.append(struct.pack("<IHHHHH", 0, 0, 0x96, sidx[m.name], at, 1))
                next_method += 1
        tables[0x02] = typedefs
        tables[0x06] = methoddefs
        if nested:
            tables[0x29] = nested
        tables[0x20] = [struct.pack("<IHHHHIHHH", 0x8004, 1, 0, 0, 0, 0, 0, sidx[asm.name], 0)]
    if refs:
        tables[0x23] = [struct.pack("<HHHHIHHHH", 1, 0, 0, 0, 0, 0, sidx[r], 0, 0) for r in refs]
    valid = sum(1 << t for t in tables)
    stream = bytearray(struct.pack("<IBBBBQQ", 0, 2, 0, 0, 1, valid, 0))
    for t in sorted(tables):
        stream += struct.pack("<I", len(tables[t]))
    for t in sorted(tables):
        stream += b"".join(tables[t])
    streams = [("#~", _pad4(bytes(stream))), ("#Strings", _pad4(strings)),
               ("#GUID", bytes(guid)), ("#Blob", _pad4(bytes(blob)))]  # fmt: skip
    version = b"v4.0.30319\0\0"
    header = struct.pack("<IHHII", 0x424A5342, 1, 1, 0, len(version)) + version
    header += struct.pack("<HH", 0, len(streams))
    names_size = sum(8 + len(_pad4(n.encode() + b"\0")) for n, _ in streams)
    offset = len(header) + names_size
    body = b""
    for name, data in streams:
        header += struct.pack("<II", offset + len(body), len(data)) + _pad4(name.encode() + b"\0")
        body += data
    return header + body


class _Layout:
    """One section's bytes, growing; ``put`` returns the RVA of what it placed."""

    def __init__(self) -> None:
        self.data = bytearray()

    def put(self, b: bytes, align: int = 4) -> int:
        self.data += b"\0" * (-len(self.data) % align)
        rva = TEXT_RVA + len(self.data)
        self.data += b
        return rva


def _sections(entries: list[tuple[int, int, int]]) -> bytes:
    out = struct.pack("<II", 0, len(entries))
    return out + b"".join(struct.pack("<III", *e) for e in sorted(entries))


def _code(lay: _Layout, asms: list[Assembly], arch: int):  # type: ignore[no-untyped-def]
    """Place code; returns (runtime functions, per-assembly entry rf index lists,
    cold pairs, expected entries)."""
    hot: list[tuple[int, int]] = []  # (rva, size)
    cold_parts: list[tuple[int, int, int]] = []  # (hot rf index, size, owner order)
    entries: list[list[int]] = []
    expected: list[tuple[int, int, str, int]] = []  # (rva, length, type::method, cold size)
    for asm in asms:
        idx = []
        for t in asm.types:
            for m in t.methods:
                start = lay.put(b"\xcc" * m.code, 16)
                idx.append(len(hot))
                hot.append((start, m.code))
                length = m.code
                if m.funclet:
                    f = lay.put(b"\xcc" * m.funclet, 4 if arch == ARM64 else 1)
                    hot.append((f, m.funclet))
                    length = f + m.funclet - start
                if m.cold:
                    cold_parts.append((idx[-1], m.cold, len(expected)))
                expected.append((start, length, f"{t.namespace}.{t.name}::{m.name}", m.cold))
        entries.append(idx)
    rfs = list(hot)
    pairs = []
    for hot_index, size, order in cold_parts:
        c = lay.put(b"\xcc" * size, 16)
        pairs.append((len(rfs), hot_index))
        rva, length, name, _ = expected[order]
        expected[order] = (rva, length, name, c)
        rfs.append((c, size))
    return rfs, entries, pairs, expected


def _runtime_functions(rfs: list[tuple[int, int]], arch: int) -> bytes:
    if arch == X64:
        return b"".join(struct.pack("<III", r, r + s, 0) for r, s in rfs)
    # ARM64: packed unwind data (flag 1), function length in words in bits 2..12
    return b"".join(struct.pack("<II", r, 1 | (s // 4) << 2) for r, s in rfs)


def build_image(
    asms: list[Assembly],
    *,
    composite: bool = False,
    arch: int = X64,
    version: tuple[int, int] = (5, 4),
    instance: list[tuple[bytes, int]] = (),  # type: ignore[assignment]
) -> tuple[bytes, list[tuple[int, int, str, int]]]:
    """The image bytes and the expected (rva, length, Type::Method, cold rva) per method.

    ``instance``: (R2R method signature, index of the method in declaration order) pairs
    for InstanceMethodEntryPoints (that method's runtime function is reused).
    """
    lay = _Layout()
    rfs, entries, pairs, expected = _code(lay, asms, arch)
    rf_bytes = _runtime_functions(rfs, arch)
    rf_rva = lay.put(rf_bytes)
    r2r_sections = [(102, rf_rva, len(rf_bytes))]
    if pairs:
        hc = b"".join(struct.pack("<II", c, h) for c, h in pairs)
        r2r_sections.append((120, lay.put(hc), len(hc)))
    flat = [i for idx in entries for i in idx]
    if instance:
        buckets: list[list[tuple[int, bytes]]] = [[], []]
        for k, (sig, which) in enumerate(instance):
            buckets[k % 2].append((k, sig + enc_unsigned(flat[which] << 1)))
        ht = enc_hashtable(buckets, 2)
        r2r_sections.append((109, lay.put(ht), len(ht)))

    def entry_points(asm: Assembly, idx: list[int]) -> bytes:
        listed = [m.methoddef_entry for t in asm.types for m in t.methods]
        elements = {i: enc_unsigned(rf << 1) for i, rf in enumerate(idx) if listed[i]}
        return enc_native_array(len(idx), elements)

    directories = [(0, 0)] * 16
    if not composite:
        (asm,) = asms
        md = metadata(asm)
        md_rva = lay.put(md)
        ep = entry_points(asm, entries[0])
        r2r_sections.append((103, lay.put(ep), len(ep)))
        header = struct.pack("<IHH", 0x00525452, *version) + _sections(r2r_sections)
        r2r_rva = lay.put(header)
        cli = struct.pack("<IHHIII", 72, 2, 5, md_rva, len(md), 4)
        cli += struct.pack("<I", 0) + b"\0" * 40 + struct.pack("<II", r2r_rva, len(header))
        directories[14] = (lay.put(cli), 72)
    else:
        comp_entries = []
        for asm, idx in zip(asms, entries, strict=True):
            md = metadata(asm)
            md_rva = lay.put(md)
            cli = struct.pack("<IHHIII", 72, 2, 5, md_rva, len(md), 0) + b"\0" * 52
            cli_rva = lay.put(cli)
            ep = entry_points(asm, idx)
            core = _sections([(103, lay.put(ep), len(ep))])
            comp_entries.append(struct.pack("<IIII", cli_rva, 72, lay.put(core), len(core)))
        ca = b"".join(comp_entries)
        manifest = metadata(None, [a.name for a in asms])
        mvids = b"".join(a.mvid for a in asms)
        r2r_sections += [(115, lay.put(ca), len(ca)), (112, lay.put(manifest), len(manifest)),
                         (118, lay.put(mvids), len(mvids))]  # fmt: skip
        header = struct.pack("<IHHI", 0x00525452, *version, 0x2)
        header += struct.pack("<I", len(r2r_sections))
        header += b"".join(struct.pack("<III", *e) for e in sorted(r2r_sections))
        r2r_rva = lay.put(header)
        name_rva = lay.put(b"RTR_HEADER\0")
        fn_rva = lay.put(struct.pack("<I", r2r_rva))
        names_rva = lay.put(struct.pack("<I", name_rva))
        ord_rva = lay.put(struct.pack("<H", 0))
        export = struct.pack("<IIHHIIIIIII", 0, 0, 0, 0, name_rva, 1, 1, 1, fn_rva, names_rva,
                             ord_rva)  # fmt: skip
        directories[0] = (lay.put(export), 40)
    return _pe(bytes(lay.data), arch, directories), expected


def _pe(section: bytes, arch: int, directories: list[tuple[int, int]]) -> bytes:
    raw_size = len(section) + (-len(section) % FILE_ALIGN)
    dos = bytearray(0x80)
    dos[0:2] = b"MZ"
    struct.pack_into("<I", dos, 0x3C, 0x80)
    coff = struct.pack("<HHIIIHH", arch ^ LINUX, 1, 0, 0, 0, 240, 0x2022)
    opt = bytearray(240)
    struct.pack_into("<H", opt, 0, 0x20B)
    struct.pack_into("<I", opt, 56, TEXT_RVA + raw_size)  # SizeOfImage
    struct.pack_into("<I", opt, 108, 16)
    for i, (rva, size) in enumerate(directories):
        struct.pack_into("<II", opt, 112 + 8 * i, rva, size)
    sec = struct.pack("<8sIIIIIIHHI", b".text", len(section), TEXT_RVA, raw_size, FILE_ALIGN,
                      0, 0, 0, 0, 0x60000020)  # fmt: skip
    headers = bytes(dos) + b"PE\0\0" + coff + bytes(opt) + sec
    headers += b"\0" * (FILE_ALIGN - len(headers))
    return headers + section + b"\0" * (raw_size - len(section))
