"""Is this file a .NET assembly? (A PE image with a CLI header.)

``profkit run app.dll`` must tell a managed assembly from a native DLL or anything else
before starting a runtime that would fail with a less helpful message (and never wait on a
FIFO: :mod:`profkit.clr.inputfile`). The PE reader
(:mod:`profkit.formats.perfmap.pe`) checks every size it reads before using it; the file
is refused above a size no assembly reaches, so a huge file is never read into memory.
"""

from __future__ import annotations

from profkit.engine.contract import looks_like_assembly_name
from profkit.errors import FormatError, UsageError

__all__ = ["MAX_ASSEMBLY_BYTES", "check_assembly", "looks_like_assembly_name"]

#: Larger than any real assembly (System.Private.CoreLib is ~10 MB); a bound on memory.
MAX_ASSEMBLY_BYTES = 1 << 30
_CLI_DIR_INDEX = 14


def check_assembly(path: str) -> None:
    """Return if ``path`` is a .NET assembly; raise :class:`UsageError` saying why not."""
    from profkit.clr.inputfile import read_regular
    from profkit.formats.perfmap.pe import read_pe

    try:
        data = read_regular(path, MAX_ASSEMBLY_BYTES, "a .NET assembly")  # a FIFO never blocks
    except FormatError as exc:
        raise UsageError(f"{path}: {exc.detail}") from None
    try:
        image = read_pe(data, path=path)
    except FormatError as exc:
        raise UsageError(f"{path}: not a .NET assembly ({exc.detail})") from None
    rva, length = image.directories[_CLI_DIR_INDEX] if len(image.directories) > 14 else (0, 0)
    if not rva or not length:
        raise UsageError(
            f"{path}: not a .NET assembly (a PE image without a CLI header: native code)"
        )
