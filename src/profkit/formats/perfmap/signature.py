"""The r2rmap signature crossgen2 computes, and the map ↔ image check built on it.

Signature (spec §1.6) = MD5 over: the compilation's input assemblies' MVIDs, in
.NET ``Guid.ToByteArray()`` byte order (= the bytes stored in the ``#GUID`` heap), sorted
by assembly simple name ordinal-ignore-case; then the OS, architecture and ABI tokens as
little-endian uint32. It is written in hex to the map's ``FFFFFFFF`` header line and raw
into the image's type-21 debug entry, so equality of the two proves the pair belongs
together; file names prove nothing (v0 builds and renames change them, spec §1.2).
"""

from __future__ import annotations

import hashlib
import struct
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from profkit.formats.perfmap.pe import PEImage
from profkit.formats.perfmap.r2rmap import R2RPerfMap


def _ordinal_ignore_case(name: str) -> bytes:
    """Sort key matching .NET ``StringComparer.OrdinalIgnoreCase`` (per-char simple upper)."""
    upper = "".join(c.upper() if len(c.upper()) == 1 else c for c in name)
    return upper.encode("utf-16-be", "surrogatepass")


def compute_signature(
    inputs: Iterable[tuple[str, uuid.UUID | bytes]], *, os: int, architecture: int, abi: int
) -> bytes:
    """The 16-byte signature for input assemblies ``(simple name, MVID)`` and the tokens.

    An MVID given as ``bytes`` is taken as stored (ToByteArray order); a ``uuid.UUID``
    is converted with ``bytes_le``, which is the same order.
    """
    md5 = hashlib.md5(usedforsecurity=False)
    for _, mvid in sorted(inputs, key=lambda item: _ordinal_ignore_case(item[0])):
        raw = mvid.bytes_le if isinstance(mvid, uuid.UUID) else bytes(mvid)
        if len(raw) != 16:
            raise ValueError(f"an MVID is 16 bytes, got {len(raw)}")
        md5.update(raw)
    md5.update(struct.pack("<III", os, architecture, abi))
    return md5.digest()


@dataclass(frozen=True)
class VerifyResult:
    """Outcome of :func:`verify_map`; ``ok`` is the verdict, the rest explains it."""

    ok: bool
    image_signature: bytes
    map_signature: bytes | None
    image_version: int
    map_version: int | None
    image_file_name: str
    recomputed: bytes | None
    notes: tuple[str, ...]


def verify_map(image: PEImage, perfmap: R2RPerfMap, map_file_name: str) -> VerifyResult | None:
    """Compare the image's type-21 entry with the map's header; None if the image has none.

    Also recomputes the signature from the image's own MVID and the map's OS/arch/ABI
    tokens when the image carries metadata (a non-composite image), as a second opinion.
    """
    info = image.perfmap_info()
    if info is None:
        return None
    header = perfmap.header
    notes: list[str] = []
    ok = header.signature is not None and header.signature == info.signature
    if header.signature is None:
        notes.append("the map has no usable signature header line")
    if info.signature == bytes(16):
        notes.append("the image's signature is all zeros: this build cannot be matched")
        ok = False
    base = map_file_name.replace("\\", "/").rsplit("/", 1)[-1]
    if info.file_name and base != info.file_name:
        notes.append(f"the image expects a map named {info.file_name} (names are not checked)")
    recomputed = None
    mvid = image.mvid_bytes()
    tokens = (header.os, header.architecture, header.abi)
    if mvid is not None and None not in tokens:
        os_token, arch_token, abi_token = (int(t) for t in tokens)  # type: ignore[arg-type]
        recomputed = compute_signature(
            [("", mvid)], os=os_token, architecture=arch_token, abi=abi_token
        )
        if recomputed != info.signature:
            notes.append(
                "MD5(image MVID + the map's OS/arch/ABI) differs from the image's signature "
                "(a composite image, or the map's tokens are not the image's)"
            )
    return VerifyResult(
        ok, info.signature, header.signature, info.version, header.version, info.file_name,
        recomputed, tuple(notes),
    )  # fmt: skip
