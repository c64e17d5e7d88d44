"""R2R images seen in a profile → their maps, built from the images themselves, cached.

``perf script`` names the file of every frame it cannot symbolize (``[unknown]
(/…/System.Private.CoreLib.dll)``); perfinfo and perf's MMAP events say where each
image was loaded. :class:`ImageMaps` turns each such R2R image into a lookup table of
its method bodies by RVA (:func:`~profkit.formats.r2r.build_r2rmap`), so a frame can be
named from either address form perf prints:

* an absolute IP (sample lines; ``perf script -F ip``): ``rva = ip - base``, with the
  base from perfinfo or MMAP events;
* a DSO-relative address (callchain lines of ``perf record -g`` data: perf prints
  ``ip - mapping start + file offset``, i.e. a file offset in the image): the image's
  section table turns it into an RVA, no base needed.

Maps are cached under ``$XDG_CACHE_HOME/profkit/r2r/`` keyed by the image's perf-map
signature (crossgen2's MD5 of MVIDs and target) plus a CRC of its runtime-function
table: the signature alone names the IL, and the same IL recompiled by another
crossgen lays code out differently.
"""

from __future__ import annotations

import os
import zlib
from dataclasses import dataclass

import numpy as np

from profkit.errors import FormatError
from profkit.formats.perfmap._io import read_input, write_atomic
from profkit.formats.perfmap.r2rmap import R2RPerfMap, read_r2rmap, write_r2rmap
from profkit.formats.perfmap.symbolizer import Symbolizer
from profkit.formats.r2r.image import (
    SECTION_RUNTIME_FUNCTIONS,
    NotReadyToRunError,
    R2RImage,
    read_r2r_image,
)
from profkit.formats.r2r.mapbuilder import build_r2rmap, image_signature


def default_cache_dir() -> str:
    """``$XDG_CACHE_HOME/profkit/r2r`` (``~/.cache/profkit/r2r`` by default)."""
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(root, "profkit", "r2r")


def cache_key(image: R2RImage) -> str:
    """``<SIGNATURE>-<CRC32 of the runtime functions>``: see the module docstring."""
    crc = 0
    if SECTION_RUNTIME_FUNCTIONS in image.sections:
        rva, size = image.sections[SECTION_RUNTIME_FUNCTIONS]
        off = image.pe.rva_to_offset(rva, size, "RuntimeFunctions")
        crc = zlib.crc32(image.pe.data[off : off + size])
    return f"{image_signature(image).hex().upper()}-{crc:08X}"


def map_for_image(image: R2RImage, cache_dir: str | None) -> tuple[R2RPerfMap, bool]:
    """The image's map, from the cache when there (second value: True = cache hit).

    A cache file that does not parse or whose signature differs is rebuilt; a cache
    directory that cannot be written is not an error (the map is still returned).
    """
    key = cache_key(image)
    path = os.path.join(cache_dir, key + ".ni.r2rmap") if cache_dir else None
    if path is not None and os.path.isfile(path):
        try:
            cached = read_r2rmap(read_input(path, FormatError), path=path)
            if cached.header.signature == image_signature(image):
                return cached, True
        except FormatError:
            pass
    built = build_r2rmap(image)
    if path is not None:
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            write_atomic(path, write_r2rmap(built))
        except OSError:
            pass
    return built, False


@dataclass
class ImageTable:
    """One image's method bodies by RVA, and how to turn perf's addresses into RVAs."""

    path: str
    perfmap: R2RPerfMap
    symbolizer: Symbolizer
    base: int | None
    size: int
    file_size: int
    #: (raw pointer, raw size, virtual address) per section
    sections: np.ndarray
    from_cache: bool = False

    def rvas(self, addresses: np.ndarray) -> np.ndarray:
        """RVA per address (int64), -1 where neither address form fits the image."""
        addrs = addresses.astype(np.uint64)
        out = np.full(len(addrs), -1, dtype=np.int64)
        if self.base is not None:
            inside = (addrs >= np.uint64(self.base)) & (addrs < np.uint64(self.base + self.size))
            out[inside] = (addrs[inside] - np.uint64(self.base)).astype(np.int64)
        else:
            inside = np.zeros(len(addrs), bool)
        small = ~inside & (addrs < np.uint64(self.file_size))
        if small.any():
            offs = addrs[small].astype(np.int64)
            rv = np.full(len(offs), -1, dtype=np.int64)
            for raw, raw_size, va in self.sections.tolist():
                hit = (offs >= raw) & (offs < raw + raw_size)
                rv[hit] = offs[hit] - raw + va
            out[small] = rv
        return out


class ImageMaps:
    """Lazily loads R2R images by path and keeps one :class:`ImageTable` per image.

    ``bases`` maps image paths to load bases (perfinfo, MMAP events); ``given`` maps
    image stems to r2rmaps the user supplied (used instead of building one);
    ``image_dirs`` are searched first for an image's file name (profiles moved from
    another machine).
    """

    def __init__(
        self,
        *,
        cache_dir: str | None,
        image_dirs: list[str] | None = None,
        given: dict[str, R2RPerfMap] | None = None,
    ) -> None:
        self.cache_dir = cache_dir
        self.image_dirs = list(image_dirs or [])
        self.given = dict(given or {})
        self.bases: dict[str, int] = {}
        self.tables: dict[str, ImageTable | None] = {}

    def add_base(self, path: str, base: int) -> None:
        self.bases.setdefault(path, base)

    def _find(self, path: str) -> str | None:
        name = os.path.basename(path)
        for candidate in [*(os.path.join(d, name) for d in self.image_dirs), path]:
            if os.path.isfile(candidate):
                return candidate
        return None

    def table(self, path: str) -> ImageTable | None:
        """The table for the image at ``path``; None if it is not an R2R image or absent.

        A file that starts like a PE image but is damaged raises FormatError.
        """
        if path in self.tables:
            return self.tables[path]
        table = None
        found = self._find(path)
        if found is not None and _looks_like_pe(found):
            try:
                image = read_r2r_image(read_input(found, FormatError), path=found)
            except NotReadyToRunError:
                image = None
            if image is not None:
                table = self._table_of(path, image)
        self.tables[path] = table
        return table

    def _table_of(self, path: str, image: R2RImage) -> ImageTable:
        stem = os.path.basename(path).rsplit(".", 1)[0].lower()
        perfmap = self.given.get(stem)
        hit = False
        if perfmap is None:
            perfmap, hit = map_for_image(image, self.cache_dir)
        sym = Symbolizer()
        sym.add_r2rmap(perfmap, 0, path)
        pe = image.pe
        size = max((s.virtual_address + max(s.virtual_size, s.raw_size) for s in pe.sections),
                   default=0)  # fmt: skip
        sections = np.array(
            [(s.raw_pointer, s.raw_size, s.virtual_address) for s in pe.sections if s.raw_size],
            dtype=np.int64,
        ).reshape(-1, 3)
        return ImageTable(
            path, perfmap, sym, self.bases.get(path), size, len(pe.data), sections, hit
        )


def _looks_like_pe(path: str) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(2) == b"MZ"
    except OSError:
        return False
