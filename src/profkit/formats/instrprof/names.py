"""The names sections of raw and indexed profiles (spec §4.6) and the MD5 name table.

A names section is a run of blocks ``ULEB128 plain_size, ULEB128 packed_size,
payload`` (zlib when ``packed_size`` is non-zero), each holding names joined by ``0x01``.
Raw profiles carry function and vtable names this way; indexed files their vtable names.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

from profkit.formats._binary import Cursor
from profkit.formats.instrprof.hashing import name_md5

#: zlib cannot expand by more than ~1032:1; a larger declared size is a lie.
_MAX_ZLIB_RATIO = 1100


def decode_names(cur: Cursor, size: int, what: str) -> list[str]:
    """Decode a names section of ``size`` bytes (spec §4.6): ULEB sizes, zlib or plain blocks."""
    section = cur.sub(size, what)
    names: list[str] = []
    while section.remaining:
        start = section.pos
        plain_len = _uleb(section, what)
        packed_len = _uleb(section, what)
        if packed_len:
            blob = section.take(packed_len, f"{what} (compressed block)")
            if plain_len > packed_len * _MAX_ZLIB_RATIO + 64:
                raise section.fail(
                    "too_large", f"{what}: {plain_len} bytes from {packed_len} compressed", start
                )
            try:
                d = zlib.decompressobj()
                text = d.decompress(blob, plain_len)
            except zlib.error as exc:
                raise section.fail("malformed", f"{what}: zlib: {exc}", start) from None
            if len(text) != plain_len or d.unconsumed_tail:
                raise section.fail(
                    "malformed",
                    f"{what}: block inflates to {len(text)} bytes, header says {plain_len}",
                    start,
                )
        else:
            text = bytes(section.take(plain_len, what))
        if text:
            names.extend(text.decode("utf-8", "surrogateescape").split("\x01"))
        while section.remaining and section.data[section.pos] == 0:
            section.pos += 1
    return names


def canonical_name(name: str) -> str:
    """LLVM's canonical PGO name: cut at the first ``.`` but keep ``.__uniq.`` suffixes."""
    uniq = name.find(".__uniq.")
    if uniq >= 0:
        dot = name.find(".", uniq + len(".__uniq."))
        return name if dot < 0 else name[:dot]
    dot = name.find(".")
    return name if dot < 0 else name[:dot]


def add_names(symtab: dict[int, str], names: Sequence[str]) -> None:
    """Register names (and their canonical forms) in an MD5 → name table.

    Hashes inline rather than through :func:`name_md5`'s cache: a raw file's 20,000
    names are each hashed once, so the cache would only cost time. :mod:`hashlib` is
    imported here, not with the module, for the reason given in :mod:`.hashing`.
    """
    import hashlib

    md5 = hashlib.md5
    from_bytes = int.from_bytes
    for name in names:
        ref = from_bytes(md5(name.encode("utf-8", "surrogateescape")).digest()[:8], "little")
        if ref not in symtab:
            symtab[ref] = name
        if "." in name:
            canon = canonical_name(name)
            if canon != name:
                symtab.setdefault(name_md5(canon), canon)


def _uleb(cur: Cursor, what: str) -> int:
    result = shift = 0
    start = cur.pos
    while True:
        if cur.pos >= cur.end:
            raise cur.fail("truncated", f"{what}: unterminated LEB128", start)
        byte = cur.data[cur.pos]
        cur.pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result
        shift += 7
        if shift > 63:
            raise cur.fail("malformed", f"{what}: LEB128 longer than 64 bits", start)
