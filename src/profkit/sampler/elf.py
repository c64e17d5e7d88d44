"""Just enough ELF to find a few symbols' addresses in the target's python or libpython.

Why not pyelftools: the sampler needs two or three symbols once per attach, and the
collector side of profkit keeps to the standard library; this reads only the section
headers and the symbol tables (a few hundred KB of a ~25 MB libpython), with every size
checked against the file before anything is read.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import BinaryIO

from profkit._record import record
from profkit.sampler.errors import AttachError

_SHT_SYMTAB = 2
_SHT_DYNSYM = 11
_PT_LOAD = 1
_MAX_TABLE = 256 << 20


@record(frozen=True)
class ElfSymbols:
    """Symbol values found in one file, and the virtual address its offset 0 maps to."""

    path: str
    symbols: dict[str, int]
    base_vaddr: int  #: p_vaddr - p_offset of the first PT_LOAD (0 for most .so and PIE files)


def read_symbols(f: BinaryIO, path: str, wanted: Iterable[str]) -> ElfSymbols:
    """The values of the ``wanted`` symbols in the 64-bit little-endian ELF file ``f``."""
    want = set(wanted)
    f.seek(0, 2)
    size = f.tell()

    def read_at(offset: int, length: int) -> bytes:
        if offset < 0 or length < 0 or offset + length > size or length > _MAX_TABLE:
            raise AttachError(f"{path}: offset 0x{offset:x}: ELF table runs past the file end")
        f.seek(offset)
        return f.read(length)

    head = read_at(0, 64) if size >= 64 else b""
    if head[:4] != b"\x7fELF":
        raise AttachError(f"{path}: offset 0x0: not an ELF file")
    if head[4] != 2 or head[5] != 1:
        raise AttachError(f"{path}: offset 0x4: only 64-bit little-endian ELF is supported")
    (e_phoff, e_shoff) = struct.unpack_from("<QQ", head, 0x20)
    e_phentsize, e_phnum, e_shentsize, e_shnum = struct.unpack_from("<HHHH", head, 0x36)
    base = 0
    if e_phentsize >= 56:
        ph = read_at(e_phoff, e_phentsize * e_phnum)
        for i in range(e_phnum):
            p_type, _flags, p_offset, p_vaddr = struct.unpack_from("<IIQQ", ph, i * e_phentsize)
            if p_type == _PT_LOAD:
                base = p_vaddr - p_offset
                break
    if e_shentsize < 64 or e_shnum == 0:
        raise AttachError(f"{path}: offset 0x{e_shoff:x}: no section headers")
    sh = read_at(e_shoff, e_shentsize * e_shnum)
    sections = [struct.unpack_from("<IIQQQQIIQQ", sh, i * e_shentsize) for i in range(e_shnum)]
    found: dict[str, int] = {}
    for s_type in (_SHT_DYNSYM, _SHT_SYMTAB):
        for (
            _name,
            sh_type,
            _fl,
            _addr,
            sh_offset,
            sh_size,
            sh_link,
            _i,
            _al,
            sh_entsize,
        ) in sections:
            if sh_type != s_type or sh_entsize < 24 or sh_link >= e_shnum:
                continue
            strtab_sec = sections[sh_link]
            strtab = read_at(strtab_sec[4], strtab_sec[5])
            table = read_at(sh_offset, sh_size)
            for off in range(0, len(table) - 23, sh_entsize):
                st_name, _info, _other, shndx, value, _size = struct.unpack_from(
                    "<IBBHQQ", table, off
                )
                if value == 0 or shndx == 0:
                    continue
                end = strtab.find(b"\0", st_name)
                name = strtab[st_name:end].decode("latin-1")
                if name in want and name not in found:
                    found[name] = value
            if want <= found.keys():
                return ElfSymbols(path, found, base)
    return ElfSymbols(path, found, base)
