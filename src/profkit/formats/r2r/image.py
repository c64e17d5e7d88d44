"""ReadyToRun images: headers, sections, runtime functions and named method bodies.

An R2R image is a PE file whose CLI header's ``ManagedNativeHeader`` points at a
``READYTORUN_HEADER`` (signature ``RTR``), or — for a composite image — whose export
``RTR_HEADER`` does. Its sections say where the code is (readytorun-format.md):

* ``RuntimeFunctions`` (102): sorted ``RUNTIME_FUNCTION`` records, one per code block
  (a method's main body, then its funclets); 12 bytes with an end RVA on x64, 8 elsewhere.
* ``MethodDefEntryPoints`` (103, per assembly): a NativeArray indexed by MethodDef row
  whose elements are the entry runtime-function index (``<< 1``, or ``<< 2`` with fixups).
* ``InstanceMethodEntryPoints`` (109): a NativeHashtable of generic instantiations, each
  a method signature (flags, owner type, token, instantiation) then the index.
* ``HotColdMap`` (120, R2R 8.0+): (cold index, hot index) pairs for split methods.
* ``ComponentAssemblies`` (115) + ``ManifestMetadata`` (112) + ``ManifestAssemblyMvids``
  (118): the per-assembly headers, names and MVIDs of a composite image.

A method body is its entry runtime function plus the following ones up to the next
entry point (its funclets), exactly the range crossgen2 emitted as one node; cold parts
(hot/cold splitting) come from the hot-cold map. Names are crossgen2's (signatures.py).

This module reads the headers (PE → CLI → ReadyToRun → per-assembly) into an
:class:`R2RImage`; ``methods.py`` turns its sections into method bodies and
``entrynames.py`` names their entry points.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from dataclasses import dataclass, field

from profkit.errors import FormatError, ProfkitError
from profkit.formats._binary import Cursor
from profkit.formats.perfmap.pe import _MACHINES, _OS_XOR, PEImage, read_pe
from profkit.formats.r2r.metadata import ASSEMBLYREF, Metadata

RTR_SIGNATURE = 0x00525452  # "RTR\0"
COMIMAGE_FLAGS_IL_LIBRARY = 0x4
FLAG_COMPOSITE = 0x2

SECTION_RUNTIME_FUNCTIONS = 102
SECTION_METHODDEF_ENTRYPOINTS = 103
SECTION_INSTANCE_ENTRYPOINTS = 109
SECTION_MANIFEST_METADATA = 112
SECTION_COMPONENT_ASSEMBLIES = 115
SECTION_OWNER_COMPOSITE = 116
SECTION_MANIFEST_MVIDS = 118
SECTION_HOT_COLD_MAP = 120

#: perf-map tokens (spec §1.5) for the machine and OS the COFF header encodes.
_ARCH_TOKEN = {"ARM": 1, "ARM64": 2, "X64": 3, "X86": 4, "RiscV64": 5, "LoongArch64": 6}
_OS_TOKEN = {"Windows": 1, "Linux": 2, "OSX": 3, "FreeBSD": 4, "NetBSD": 5, "SunOS": 6}
_MAX_SECTIONS = 256  # far above the ~25 types defined


class NotReadyToRunError(FormatError):
    """A valid PE/CLI file that carries no ReadyToRun code (e.g. an IL-only assembly)."""


@dataclass(frozen=True)
class MethodBody:
    """One compiled method body: hot range, crossgen2 name, and cold ranges if split."""

    rva: int
    length: int
    name: str
    cold: tuple[tuple[int, int], ...] = ()


@dataclass
class Component:
    """One input assembly: its name, MVID (as stored) and metadata, and its sections."""

    name: str
    mvid: bytes | None
    metadata: Metadata | None
    sections: dict[int, tuple[int, int]]


@dataclass
class R2RImage:
    """A parsed ReadyToRun image (see the module docstring for what is read)."""

    pe: PEImage
    path: str | None
    major: int
    minor: int
    flags: int
    sections: dict[int, tuple[int, int]]
    architecture: str
    os: str
    components: list[Component]
    composite: bool
    _resolved: dict[str, Metadata | None] = field(default_factory=dict)

    @property
    def version(self) -> str:
        return f"{self.major}.{self.minor}"

    @property
    def tokens(self) -> tuple[int, int, int]:
        """(OS, architecture, ABI) perf-map tokens; the ABI is always Default (1)."""
        return _OS_TOKEN.get(self.os, 0), _ARCH_TOKEN.get(self.architecture, 0), 1

    def methods(self) -> list[MethodBody]:
        """Every compiled method body, sorted by RVA (see module docstring)."""
        from profkit.formats.r2r.methods import collect_methods  # it needs this class

        return collect_methods(self)

    def find_assembly(self, name: str) -> Metadata | None:
        """Metadata of assembly ``name`` from a file beside the image (module overrides)."""
        if name in self._resolved:
            return self._resolved[name]
        md = None
        for comp in self.components:
            if comp.name.lower() == name.lower() and comp.metadata is not None:
                md = comp.metadata
        if md is None and self.path is not None:
            candidate = os.path.join(os.path.dirname(self.path) or ".", name + ".dll")
            try:
                md = _metadata_of_file(candidate)
            except (OSError, ProfkitError):  # absent or unreadable: names say so
                md = None
        self._resolved[name] = md
        return md


def r2r_error(path: str | None, kind: str, detail: str, offset: int) -> FormatError:
    """A :class:`FormatError` naming the image file and the offset of the bad bytes."""
    return FormatError(kind, detail, path=path, offset=offset)  # type: ignore[arg-type]


def to_offset(pe: PEImage, rva: int, size: int, what: str, at: int = 0) -> int:
    """File offset of ``size`` bytes at ``rva``; an RVA outside every section is an
    error at ``at``, the file offset where that RVA was read."""
    try:
        return pe.rva_to_offset(rva, size, what)
    except FormatError as exc:
        if exc.offset is None:
            raise r2r_error(pe.path, exc.kind, exc.detail, at) from None
        raise


def _directory_offset(pe: PEImage, index: int) -> int:
    """File offset of data directory ``index`` in the optional header."""
    return pe.directory_offset + 8 * index


def _cli_header(pe: PEImage) -> tuple[int, int, int, int, int] | None:
    """(CLI header file offset, metadata RVA, metadata size, flags, ManagedNativeHeader RVA)."""
    if len(pe.directories) <= 14:
        return None
    rva, size = pe.directories[14]
    if not rva or not size:
        return None
    return _read_cor_header(pe, rva, _directory_offset(pe, 14))


def _read_cor_header(pe: PEImage, rva: int, at: int) -> tuple[int, int, int, int, int]:
    off = to_offset(pe, rva, 72, "CLI header", at)
    cur = Cursor(pe.data, off, path=pe.path, error=FormatError)
    cur.skip(8, "CLI header")
    md_rva, md_size, flags = cur.unpack("<III", "CLI header")
    cur.skip(4 + 8 * 5, "CLI header")
    native_rva, native_size = cur.unpack("<II", "ManagedNativeHeader")
    return off, md_rva, md_size, flags, native_rva if native_size else 0


def _metadata_at(pe: PEImage, md_rva: int, md_size: int, at: int) -> Metadata:
    off = to_offset(pe, md_rva, md_size, "metadata", at)
    return Metadata(pe.data, off, md_size, path=pe.path)


def _metadata_of_file(path: str) -> Metadata | None:
    from profkit.formats.perfmap._io import read_input

    pe = read_pe(read_input(path, FormatError), path=path)
    cli = _cli_header(pe)
    return None if cli is None else _metadata_at(pe, cli[1], cli[2], cli[0] + 8)


def _export_rva(pe: PEImage, symbol: bytes) -> int | None:
    """RVA of an exported symbol (composite images export ``RTR_HEADER``)."""
    if not pe.directories:
        return None
    rva, size = pe.directories[0]
    if not rva or not size:
        return None
    off = to_offset(pe, rva, 40, "export directory", _directory_offset(pe, 0))
    cur = Cursor(pe.data, off, path=pe.path, error=FormatError)
    cur.skip(20, "export directory")
    n_functions, n_names, functions, names, ordinals = cur.unpack("<IIIII", "export directory")
    if n_names > 0x10000 or n_functions > 0x10000:
        raise cur.fail("too_large", f"{n_names} export names / {n_functions} functions")
    name_off = to_offset(pe, names, 4 * n_names, "export name table", off + 32)
    ord_off = to_offset(pe, ordinals, 2 * n_names, "export ordinal table", off + 36)
    fn_off = to_offset(pe, functions, 4 * n_functions, "export address table", off + 28)
    for i in range(n_names):
        (name_rva,) = struct.unpack_from("<I", pe.data, name_off + 4 * i)
        at = to_offset(pe, name_rva, 1, "export name", name_off + 4 * i)
        if pe.data[at : at + len(symbol) + 1] == symbol + b"\0":
            (ordinal,) = struct.unpack_from("<H", pe.data, ord_off + 2 * i)
            if ordinal >= n_functions:
                raise cur.fail("malformed", f"export ordinal {ordinal} out of range")
            return int(struct.unpack_from("<I", pe.data, fn_off + 4 * ordinal)[0])
    return None


def _read_sections(
    pe: PEImage, rva: int, what: str, at: int = 0
) -> tuple[int, dict[int, tuple[int, int]]]:
    """A READYTORUN_CORE_HEADER at ``rva``: (flags, {section type: (rva, size)})."""
    off = to_offset(pe, rva, 8, what, at)
    cur = Cursor(pe.data, off, path=pe.path, error=FormatError)
    flags, n = cur.unpack("<II", what)
    if n > _MAX_SECTIONS:
        raise cur.fail("too_large", f"{what}: {n} sections")
    cur.check_count(n, 12, f"{what} sections")
    sections: dict[int, tuple[int, int]] = {}
    for _ in range(n):
        kind, s_rva, s_size = cur.unpack("<III", f"{what} section")
        if s_size:
            # every section must lie in the file: later reads of it cannot fail
            to_offset(pe, s_rva, s_size, f"R2R section {kind}", cur.pos - 12)
        sections.setdefault(kind, (s_rva, s_size))
    return flags, sections


def read_r2r_image(data: bytes, *, path: str | None = None) -> R2RImage:
    """Parse an R2R image; :class:`NotReadyToRunError` for a .NET file without R2R code."""
    pe = read_pe(data, path=path)
    cli = _cli_header(pe)
    header_rva = 0
    metadata = None
    if cli is not None:
        cli_off, md_rva, md_size, cor_flags, native_rva = cli
        metadata = _metadata_at(pe, md_rva, md_size, cli_off + 8) if md_size else None
        if cor_flags & COMIMAGE_FLAGS_IL_LIBRARY and native_rva:
            header_rva = native_rva
    # a composite image is found through its RTR_HEADER export, not the CLI header
    # (flag 0x2 meant "skip type validation" before R2R 4.0, so flags cannot tell)
    composite = not header_rva
    if not header_rva:
        header_rva = _export_rva(pe, b"RTR_HEADER") or 0
    if not header_rva:
        what = "an IL-only assembly" if cli is not None else "no CLI header"
        raise NotReadyToRunError(
            "bad_magic",
            f"not a ReadyToRun image ({what}: no ReadyToRun header; "
            "crossgen/crossgen2 did not compile it)",
            path=path,
            offset=0,
        )
    off = to_offset(pe, header_rva, 16, "ReadyToRun header", cli[0] + 64 if cli else 0)
    cur = Cursor(data, off, path=path, error=FormatError)
    signature, major, minor = cur.unpack("<IHH", "ReadyToRun header")
    if signature != RTR_SIGNATURE:
        raise NotReadyToRunError(
            "bad_magic",
            f"not a ReadyToRun image (header signature 0x{signature:08x}, expected 'RTR')",
            path=path,
            offset=off,
        )
    if major < 2 or major > 64:
        raise r2r_error(path, "unsupported_version", f"ReadyToRun version {major}.{minor}", off + 4)
    flags, sections = _read_sections(pe, header_rva + 8, "ReadyToRun header", off)
    arch, os_name = _machine(pe)
    composite = composite or metadata is None
    image = R2RImage(pe, path, major, minor, flags, sections, arch, os_name, [], composite)
    if composite:
        image.components = _components(image)
    else:
        assert metadata is not None
        name = metadata.assembly_name() or os.path.splitext(os.path.basename(path or "?"))[0]
        image.components = [Component(name, metadata.mvid(), metadata, sections)]
    return image


def _machine(pe: PEImage) -> tuple[str, str]:
    for xor, os_name in _OS_XOR.items():
        arch = _MACHINES.get(pe.machine ^ xor)
        if arch is not None:
            return arch, os_name
    raise r2r_error(pe.path, "malformed", f"unknown COFF machine 0x{pe.machine:04x}", 0)


def _components(image: R2RImage) -> list[Component]:
    """The component assemblies of a composite image, named from the manifest metadata."""
    pe, path = image.pe, image.path
    manifest = None
    if SECTION_MANIFEST_METADATA in image.sections:
        m_rva, m_size = image.sections[SECTION_MANIFEST_METADATA]
        manifest = Metadata(pe.data, to_offset(pe, m_rva, m_size, "manifest"), m_size, path=path)
    if SECTION_COMPONENT_ASSEMBLIES not in image.sections:
        raise r2r_error(
            path, "malformed", "composite image without a ComponentAssemblies section", 0
        )
    c_rva, c_size = image.sections[SECTION_COMPONENT_ASSEMBLIES]
    c_off = to_offset(pe, c_rva, c_size, "ComponentAssemblies")
    count = c_size // 16
    mvids: list[bytes | None] = [None] * count
    if SECTION_MANIFEST_MVIDS in image.sections:
        v_rva, v_size = image.sections[SECTION_MANIFEST_MVIDS]
        v_off = to_offset(pe, v_rva, v_size, "ManifestAssemblyMvids")
        for i in range(min(count, v_size // 16)):
            mvids[i] = bytes(pe.data[v_off + 16 * i : v_off + 16 * i + 16])
    components = []
    for i in range(count):
        at = c_off + 16 * i
        cor_rva, cor_size, hdr_rva, _ = struct.unpack_from("<IIII", pe.data, at)
        name = f"component{i + 1}"
        if manifest is not None and i + 1 <= manifest.count(ASSEMBLYREF):
            name = manifest.assembly_ref_name(i + 1)
        md = None
        if cor_size:
            cor_off, md_rva, md_size, _, _ = _read_cor_header(pe, cor_rva, at)
            md = _metadata_at(pe, md_rva, md_size, cor_off + 8)
        else:
            md = image.find_assembly(name)
        _, sections = _read_sections(pe, hdr_rva, f"component {name} header", at + 8)
        mvid = mvids[i] if mvids[i] is not None else (md.mvid() if md is not None else None)
        components.append(Component(name, mvid, md, sections))
    return components


def load_r2r_image(path: str) -> R2RImage:
    """Read and parse an R2R image file."""
    from profkit.formats.perfmap._io import read_input

    return read_r2r_image(read_input(path, FormatError), path=path)


ProgressCallback = Callable[[int], None]
