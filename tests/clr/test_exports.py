"""libprofkit_clr.so exports the two COM entry points and nothing else.

Why it matters: the runtime looks up only ``DllGetClassObject`` (and ``DllCanUnloadNow``);
any other exported symbol of a library loaded into every profiled .NET process could
interpose on, or be interposed by, one of the program's own libraries. The sources are
split over many units (``csrc/``), so what they share must stay hidden
(``-fvisibility=hidden``, ``HIDDEN`` in ``profiler.h``); this checks the built library.
"""

from __future__ import annotations

import pytest

from profkit.clr.environment import library_path
from profkit.errors import UsageError

elftools = pytest.importorskip("elftools", reason="pyelftools reads the library's symbols")


def exported(path: str) -> set[str]:
    """The names a shared library defines in its dynamic symbol table with default
    visibility (what ``nm -D --defined-only`` lists)."""
    from elftools.elf.elffile import ELFFile

    with open(path, "rb") as f:
        dynsym = ELFFile(f).get_section_by_name(".dynsym")
        return {
            sym.name
            for sym in dynsym.iter_symbols()
            if sym.name
            and sym["st_shndx"] != "SHN_UNDEF"
            and sym["st_info"]["bind"] in ("STB_GLOBAL", "STB_WEAK")
            and sym["st_other"]["visibility"] == "STV_DEFAULT"
        }


def test_only_the_com_entry_points_are_exported() -> None:
    try:
        path = library_path()
    except UsageError as exc:
        pytest.skip(str(exc))
    assert exported(path) == {"DllGetClassObject", "DllCanUnloadNow"}
