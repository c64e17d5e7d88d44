"""/proc/PID/maps parsing and the image-base rule."""

from __future__ import annotations

import pytest

from profkit.errors import PerfMapFormatError
from profkit.formats.perfmap.procmaps import image_bases, image_stem, read_proc_maps

CORELIB = "/usr/share/dotnet/shared/Microsoft.NETCore.App/6.0.0/System.Private.CoreLib.dll"
MAPS = f"""\
55d4c3a00000-55d4c3a0c000 r--p 00000000 08:01 1311 /usr/share/dotnet/dotnet
7f1480000000-7f1480100000 r--s 00000000 08:01 2222 {CORELIB}
7f1484000000-7f1484021000 r--p 00000000 08:01 2222 {CORELIB}
7f1484021000-7f1484900000 r-xp 00020000 08:01 2222 {CORELIB}
7f1484900000-7f1484980000 rw-p 008ff000 08:01 2222 {CORELIB}
7f1490000000-7f1490001000 r--p 00000000 08:01 3333 /app/My App.dll (deleted)
7f1490001000-7f1490002000 r-xp 00001000 08:01 3333 /app/My App.dll (deleted)
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0 [stack]
7f14a0000000-7f14a0010000 rwxp 00000000 00:00 0
""".encode()


def test_bases() -> None:
    bases = image_bases(read_proc_maps(MAPS))
    assert bases[CORELIB] == 0x7F1484000000  # the loaded layout, not the flat read-only copy
    assert bases["/app/My App.dll"] == 0x7F1490000000
    assert image_stem(CORELIB) == "system.private.corelib"


def test_bad_line() -> None:
    with pytest.raises(PerfMapFormatError) as info:
        read_proc_maps(MAPS + b"zz-10 r--p 0 0:0 0\n", path="maps")
    assert info.value.line == 10
