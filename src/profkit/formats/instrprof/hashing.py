"""Name hashing shared by readers and writers: the MD5 "NameRef" (spec §4.7).

LLVM keys indexed profiles and value-profile targets by the low 64 bits of the MD5 of
the PGO name, read as a little-endian integer (``MD5Hash`` in ``InstrProf.h``).

:mod:`hashlib` is imported on the first hash, not with the module: loading OpenSSL costs
~2 ms, and ``profkit profdata show`` of an indexed file usually hashes nothing.
"""

from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=1 << 16)
def name_md5(name: str | bytes) -> int:
    """The 64-bit NameRef of a PGO function (or vtable) name."""
    import hashlib  # once loaded, a sys.modules look-up (see the module docstring)

    raw = name.encode("utf-8", "surrogateescape") if isinstance(name, str) else name
    return int.from_bytes(hashlib.md5(raw).digest()[:8], "little")
