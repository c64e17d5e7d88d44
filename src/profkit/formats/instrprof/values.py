"""Value-profile data blocks (``ValueProfData``, spec §4.10), shared by the raw and indexed readers.

One block per function: ``u32 TotalSize, u32 NumValueKinds``, then per kind a record
``u32 Kind, u32 NumValueSites, u8 SiteCount[NumValueSites]`` padded to 8 and the
``(u64 value, u64 count)`` pairs of every site. Raw files use the host byte order,
indexed files little-endian. The checks follow ``ValueProfData::checkIntegrity``.
"""

from __future__ import annotations

import struct

from profkit.formats._binary import Cursor
from profkit.formats.instrprof.model import ValueKind, ValueSite

#: ``IPVK_Last + 1`` for every version we read (kinds 0..2).
MAX_VALUE_KINDS = 3
_HEADERS = {"<": struct.Struct("<II"), ">": struct.Struct(">II")}


def read_value_block(cur: Cursor, order: str, what: str) -> dict[ValueKind, list[ValueSite]]:
    """Read one block at the cursor and advance past it (by its ``TotalSize``)."""
    start = cur.pos
    hdr = _HEADERS[order]
    cur.need(hdr.size, what)
    total, nkinds = hdr.unpack_from(cur.data, start)
    if total == 8 and nkinds == 0:  # the common empty block of indexed files
        cur.pos = start + 8
        return {}
    if total < 8 or total % 8:
        raise cur.fail("malformed", f"{what}: total size {total} is not a positive multiple of 8")
    if nkinds > MAX_VALUE_KINDS:
        raise cur.fail("malformed", f"{what}: {nkinds} value kinds (at most {MAX_VALUE_KINDS})")
    block = cur.sub(total, what)
    block.pos += 8
    out: dict[ValueKind, list[ValueSite]] = {}
    for _ in range(nkinds):
        rec_start = block.pos
        kind, nsites = block.unpack(order + "II", f"{what}: value record header")
        if kind >= MAX_VALUE_KINDS:
            raise block.fail("malformed", f"{what}: value kind {kind} is invalid", rec_start)
        vk = ValueKind(kind)
        if vk in out:
            raise block.fail("malformed", f"{what}: value kind {kind} appears twice", rec_start)
        block.check_count(nsites, 1, f"{what}: value sites")
        counts = bytes(block.take(nsites, f"{what}: site counts"))
        # Padding is relative to the value record (indexed items are unaligned).
        block.skip((-(8 + nsites)) % 8, f"{what}: site count padding")
        nvalues = sum(counts)
        block.check_count(nvalues, 16, f"{what}: values")
        flat = struct.unpack_from(f"{order}{2 * nvalues}Q", block.data, block.pos)
        block.pos += 16 * nvalues
        sites: list[ValueSite] = []
        j = 0
        for c in counts:
            sites.append(
                list(zip(flat[j : j + 2 * c : 2], flat[j + 1 : j + 2 * c : 2], strict=True))
            )
            j += 2 * c
        out[vk] = sites
    return out
