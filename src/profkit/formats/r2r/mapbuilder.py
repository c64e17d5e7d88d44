"""An R2R image → the r2rmap crossgen2 ``--perfmap`` would have written for it.

Header (spec §1.4): the signature crossgen2 derives (MD5 over the input assemblies'
MVIDs sorted by name, then the OS/architecture/ABI tokens; :func:`compute_signature`),
format version 1, and the three tokens read from the COFF machine field. Body: one
``RVA LENGTH NAME`` line per compiled method body in RVA order, then — as crossgen2's
writer does for split methods — a second line with the same name for the cold part.
"""

from __future__ import annotations

from typing import Any

from profkit.formats.perfmap.r2rmap import R2RHeader, R2RPerfMap
from profkit.formats.perfmap.signature import compute_signature
from profkit.formats.r2r.image import R2RImage


def image_signature(image: R2RImage) -> bytes:
    """The 16-byte perf-map signature of ``image`` (what its type-21 entry would hold)."""
    os_token, arch_token, abi_token = image.tokens
    inputs = [(c.name, c.mvid) for c in image.components if c.mvid is not None]
    return compute_signature(inputs, os=os_token, architecture=arch_token, abi=abi_token)


def build_r2rmap(image: R2RImage) -> R2RPerfMap:
    """The v1 map of ``image``: crossgen2's header, one entry per method body (+ cold)."""
    os_token, arch_token, abi_token = image.tokens
    header = R2RHeader.build(
        image_signature(image), os=os_token, architecture=arch_token, abi=abi_token
    )
    entries: list[tuple[int, int, str]] = []
    for m in image.methods():
        entries.append((m.rva, m.length, m.name))
        entries.extend((rva, length, m.name) for rva, length in m.cold)
    return R2RPerfMap.from_entries(header, entries)


def describe_r2r(image: R2RImage) -> dict[str, Any]:
    """What ``profkit perfmap show`` prints about an R2R image's native code."""
    methods = image.methods()
    return {
        "version": image.version,
        "target": f"{image.architecture}/{image.os}",
        "composite": image.composite,
        "components": [c.name for c in image.components],
        "method_bodies": len(methods),
        "cold_parts": sum(len(m.cold) for m in methods),
        "perfmap_signature": image_signature(image).hex().upper(),
    }
