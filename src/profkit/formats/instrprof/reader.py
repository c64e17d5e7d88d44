"""Format detection and the one entry point that reads any instrumentation profile.

Sniffing follows ``llvm-profdata`` (spec §1): indexed magic, then a raw magic in either
byte order and pointer width, then "looks like text" (printable ASCII in the first 8
bytes). Readers are pure functions of bytes; :func:`read_profile` only adds the file.
"""

from __future__ import annotations

import os
from typing import Literal

from profkit.errors import ProfileFormatError
from profkit.formats.instrprof.magics import INDEXED_MAGIC, RAW_MAGICS
from profkit.formats.instrprof.model import Profile

FormatName = Literal["raw", "indexed", "text"]
#: Neighbouring LLVM formats a user may hand us by mistake.
_OTHER_MAGICS = {
    bytes.fromhex("8172666f72706dff"): "it is a MemProf raw heap profile, .memprofraw",
    bytes.fromhex("ff6d70726f667281"): "it is a big-endian MemProf raw heap profile",
}
#: Largest profile read whole. Indexed profiles of the largest programs (browsers, with
#: value profiles) are a few hundred MB; a raw file of many merged DSOs stays well below.
MAX_PROFILE_BYTES = 4 << 30
_TEXTISH = frozenset(range(0x20, 0x7F)) | frozenset(b"\t\n\v\f\r")


def sniff(data: bytes) -> FormatName | None:
    """Which reader fits ``data``: ``"raw"``, ``"indexed"``, ``"text"``, or ``None``.

    An empty file counts as raw, so it gets LLVM's "empty raw profile" error.
    """
    head = bytes(data[:8])
    if not head:
        return "raw"
    if head == INDEXED_MAGIC:
        return "indexed"
    if head in RAW_MAGICS:
        return "raw"
    if all(b in _TEXTISH for b in head):
        return "text"
    return None


def parse_profile(data: bytes, path: str | None = None) -> Profile:
    """Parse a raw, indexed or text profile held in ``data`` (``path`` names it in errors)."""
    fmt = sniff(data)
    # Each reader is imported only for a file in its format (start-up of `profdata show`).
    if fmt == "indexed":
        from profkit.formats.instrprof.indexed import parse_indexed

        return parse_indexed(data, path)
    if fmt == "raw":
        from profkit.formats.instrprof.raw import parse_raw

        return parse_raw(data, path)
    if fmt == "text":
        try:
            from profkit.formats.instrprof.text import parse_text  # type: ignore[attr-defined,unused-ignore]
        except ImportError:
            raise ProfileFormatError(
                "unsupported_version", "text profiles not supported yet", path=path, offset=0
            ) from None
        result: Profile = parse_text(data, path)
        return result
    raise not_a_profile(data, path)


def not_a_profile(data: bytes, path: str | None) -> ProfileFormatError:
    """The "bad magic" error for a file no reader fits (judged by its first 8 bytes)."""
    what = _OTHER_MAGICS.get(bytes(data[:8]), f"first bytes {bytes(data[:8]).hex()}")
    return ProfileFormatError(
        "bad_magic",
        f"not an LLVM instrumentation profile ({what})",
        path=path,
        offset=0,
    )


def read_profile_bytes(path: str | os.PathLike[str]) -> bytes:
    """The bytes of the profile file at ``path`` (``-``: stdin), read under safe-input rules.

    Through :func:`profkit._inputs.open_input`: a directory, a device (``/dev/zero``,
    ``/dev/urandom``), a dangling symlink or a FIFO nobody writes to is refused with one
    line instead of hanging or reading gigabytes; the first 8 bytes are sniffed before
    the rest is read, so a 4 GB file that is not a profile costs one small read; files
    over :data:`MAX_PROFILE_BYTES` are refused before reading.
    """
    from profkit._inputs import open_input

    name = os.fspath(path)
    with open_input(name, what="profile") as inp:
        head = inp.prefix(8)
        if head and sniff(head) is None:
            raise not_a_profile(head, inp.name)
        return inp.read_all(MAX_PROFILE_BYTES, ProfileFormatError)


def read_profile(path: str | os.PathLike[str]) -> Profile:
    """Read the profile file at ``path`` (any of the three formats; ``-`` is stdin)."""
    data = read_profile_bytes(path)
    name = os.fspath(path)
    return parse_profile(data, "stdin" if name == "-" else name)
