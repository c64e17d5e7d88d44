"""Build synthetic raw profiles for tests: every version × byte order × pointer width.

Real tools only give us little-endian x86 files of raw v8 and v10, so big-endian,
v5/v7/v9/v11 inputs are synthesised here. The struct formats are written out by
hand from the spec tables (§4.2, §4.4) rather than taken from ``layouts.py``, so a
mistake in the reader's tables shows up as a test failure instead of agreeing with
itself.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field

MAGIC64 = 0xFF6C70726F667281
MAGIC32 = 0xFF6C70726F665281

HEADER_FIELDS: dict[int, tuple[str, ...]] = {
    5: ("magic", "version", "num_data", "pad_before", "num_counters", "pad_after",
        "names_size", "counters_delta", "names_delta", "vk_last"),
    8: ("magic", "version", "ids_size", "num_data", "pad_before", "num_counters", "pad_after",
        "names_size", "counters_delta", "names_delta", "vk_last"),
    9: ("magic", "version", "ids_size", "num_data", "pad_before", "num_counters", "pad_after",
        "num_bitmap", "pad_bitmap", "names_size", "counters_delta", "bitmap_delta",
        "names_delta", "vk_last"),
    10: ("magic", "version", "ids_size", "num_data", "pad_before", "num_counters", "pad_after",
         "num_bitmap", "pad_bitmap", "names_size", "counters_delta", "bitmap_delta",
         "names_delta", "num_vtables", "vnames_size", "vk_last"),
    11: ("magic", "version", "ids_size", "num_data", "pad_before", "num_counters", "pad_after",
         "num_bitmap", "pad_bitmap", "num_uniform", "pad_uniform", "uniform_delta",
         "names_size", "counters_delta", "bitmap_delta", "names_delta", "num_vtables",
         "vnames_size", "vk_last"),
}  # fmt: skip
HEADER_FIELDS[7] = HEADER_FIELDS[8]

# (64-bit format, 32-bit format) of one data record, from the spec's offset table.
RECORD_FORMATS: dict[int, tuple[str, str]] = {
    5: ("QQQQQI2H", "QQIIII2H4x"),
    7: ("QQQQQI2H", "QQIIII2H4x"),
    8: ("QQQQQI2H", "QQIIII2H4x"),
    9: ("QQQQQQI2HI4x", "QQIIIII2HI4x"),
    10: ("QQQQQQI3H2xI", "QQIIIII3H2xI"),
    11: ("QQQQQQQI3HHI", "QQIIIIII3HHI4x"),
}


def md5ref(name: str) -> int:
    import hashlib

    return int.from_bytes(
        hashlib.md5(name.encode("utf-8", "surrogateescape")).digest()[:8], "little"
    )


@dataclass
class RawFunc:
    """One function to write. Value sites hold *target names* (kind 0) or sizes (kind 1)."""

    name: str
    hash: int
    counts: list[int]
    bitmap: bytes = b""
    # kind → sites → [(value, count)]; kind 0 values are names (str) or None (unknown)
    sites: dict[int, list[list[tuple[object, int]]]] = field(default_factory=dict)


def names_blob(names: list[str], compress: bool) -> bytes:
    raw = "\x01".join(names).encode("utf-8", "surrogateescape")
    if compress:
        packed = zlib.compress(raw, 9)
        return uleb(len(raw)) + uleb(len(packed)) + packed
    return uleb(len(raw)) + uleb(0) + raw


def uleb(v: int) -> bytes:
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def pad8(b: bytes) -> bytes:
    return b + bytes(-len(b) % 8)


def build_raw(
    funcs: list[RawFunc],
    *,
    version: int = 10,
    order: str = "<",
    psize: int = 8,
    flags: int = 0,
    binary_ids: tuple[bytes, ...] = (),
    compress: bool = True,
    byte_coverage: bool = False,
    vtables: tuple[tuple[str, int, int], ...] = (),
) -> bytes:
    """A complete raw profile holding ``funcs`` (counters laid out in order)."""
    pmask = (1 << (8 * psize)) - 1
    nkinds = 3 if version >= 10 else 2
    rec_fmt = order + RECORD_FORMATS[version][0 if psize == 8 else 1]
    rec_size = struct.calcsize(rec_fmt)
    cell = 1 if byte_coverage else 8
    fptr = {f.name: 0x400000 + 0x40 * i for i, f in enumerate(funcs)}
    counters = b""
    bitmap = b""
    offsets = []
    boffsets = []
    for f in funcs:
        offsets.append(len(counters))
        if byte_coverage:
            counters += bytes(0 if c else 0xFF for c in f.counts)
        else:
            counters += struct.pack(f"{order}{len(f.counts)}Q", *f.counts)
        boffsets.append(len(bitmap))
        bitmap += f.bitmap
    counters_padded = pad8(counters) if byte_coverage else counters
    data_addr = 0x10000
    cnt_addr = 0x20000
    bmp_addr = 0x30000
    relative = version >= 8
    recs = b""
    for i, f in enumerate(funcs):
        rec_addr = data_addr + i * rec_size
        if relative:
            cptr = (cnt_addr + offsets[i] - rec_addr) & pmask
            bptr = (bmp_addr + boffsets[i] - rec_addr) & pmask
        else:
            cptr = cnt_addr + offsets[i]
            bptr = bmp_addr + boffsets[i]
        nvs = [len(f.sites.get(k, ())) for k in range(nkinds)]
        vals: list[int] = [md5ref(f.name), f.hash, cptr]
        if version >= 11:
            vals.append(0)  # UniformCounterPtr
        if version >= 9:
            vals.append(bptr)
        vals += [fptr[f.name], 0, len(f.counts), *nvs]
        if version >= 11:
            vals.append(0)  # OffloadDeviceWaveSize
        if version >= 9:
            vals.append(len(f.bitmap))
        recs += struct.pack(rec_fmt, *vals)
    names = names_blob([f.name for f in funcs], compress)
    values = b""
    for f in funcs:
        if not any(f.sites.get(k) for k in range(nkinds)) and not any(
            k in f.sites for k in range(nkinds)
        ):
            continue
        kinds = [k for k in range(nkinds) if f.sites.get(k)]
        body = b""
        for k in kinds:
            sites = f.sites[k]
            head = struct.pack(order + "II", k, len(sites)) + bytes(len(s) for s in sites)
            head = head + bytes(-len(head) % 8)
            pairs = b""
            for s in sites:
                for v, c in s:
                    if k == 2:
                        v = int(v)  # kind 2 values are run-time addresses inside a vtable
                    if k == 0:
                        v = fptr.get(v, 0xDEAD0000) if isinstance(v, str) else 0xDEAD0000
                    pairs += struct.pack(order + "QQ", v, c)
            body += head + pairs
        values += struct.pack(order + "II", 8 + len(body), len(kinds)) + body
    vnames = names_blob([n for n, _, _ in vtables], compress) if vtables else b""
    ids = b""
    for bid in binary_ids:
        ids += struct.pack(order + "Q", len(bid)) + pad8(bid)
    h = {
        "magic": MAGIC64 if psize == 8 else MAGIC32,
        "version": version | flags,
        "ids_size": len(ids),
        "num_data": len(funcs),
        "pad_before": 0,
        "num_counters": len(counters) // cell,
        "pad_after": len(counters_padded) - len(counters),
        "num_bitmap": len(bitmap),
        "pad_bitmap": -len(bitmap) % 8,
        "num_uniform": 0,
        "pad_uniform": 0,
        "uniform_delta": 0,
        "names_size": len(names),
        "counters_delta": (cnt_addr - data_addr) & pmask if relative else cnt_addr,
        "bitmap_delta": (bmp_addr - data_addr) & pmask,
        "names_delta": 0x50000,
        "num_vtables": len(vtables),
        "vnames_size": len(vnames),
        "vk_last": nkinds - 1,
    }
    fields = HEADER_FIELDS[version]
    header = struct.pack(order + "Q" * len(fields), *(h[n] for n in fields))
    bitmap_section = pad8(bitmap) if version >= 9 else b""
    vt_section = b"".join(
        struct.pack(order + ("QQI4x" if psize == 8 else "QII"), md5ref(n), addr, size)
        for n, addr, size in vtables
    )
    vt_tail = pad8(vt_section) + pad8(vnames) if vtables else b""
    out = header + ids + recs + counters_padded + bitmap_section + pad8(names) + vt_tail + values
    assert len(out) % 8 == 0
    return out
