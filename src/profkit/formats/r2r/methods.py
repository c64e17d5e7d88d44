"""The method bodies of an R2R image: runtime functions grouped by entry point.

Why a module of its own: this is the range arithmetic (numpy over the RuntimeFunctions
table, ARM64 unwind lengths, the hot-cold map), separate from reading headers
(``image.py``) and from decoding names (``entrynames.py``). A method body is its entry
runtime function plus the following ones up to the next entry point (its funclets),
exactly the range crossgen2 emitted as one node; cold parts come from the hot-cold map.
"""

from __future__ import annotations

import struct

import numpy as np

from profkit.errors import FormatError
from profkit.formats.r2r.entrynames import EntryNamer
from profkit.formats.r2r.image import (
    SECTION_HOT_COLD_MAP,
    SECTION_INSTANCE_ENTRYPOINTS,
    SECTION_METHODDEF_ENTRYPOINTS,
    SECTION_RUNTIME_FUNCTIONS,
    MethodBody,
    R2RImage,
    r2r_error,
    to_offset,
)
from profkit.formats.r2r.metadata import METHODDEF
from profkit.formats.r2r.nativeformat import NativeReader, native_array, native_hashtable


def collect_methods(image: R2RImage) -> list[MethodBody]:
    """Every compiled method body of ``image``, sorted by RVA."""
    return _MethodCollector(image).collect()


class _MethodCollector:
    """Builds the method bodies of one image (entry points → runtime-function ranges)."""

    def __init__(self, image: R2RImage) -> None:
        self.image = image
        self.pe = image.pe
        self.path = image.path
        self.data = image.pe.data
        self.names = EntryNamer(image)

    def fail(self, kind: str, detail: str, offset: int) -> FormatError:
        return r2r_error(self.path, kind, detail, offset)

    def section_reader(
        self, sections: dict[int, tuple[int, int]], kind: int
    ) -> NativeReader | None:
        if kind not in sections:
            return None
        rva, size = sections[kind]
        off = to_offset(self.pe, rva, size, f"R2R section {kind}")
        return NativeReader(self.data, off, off + size, self.path)

    def runtime_functions(self) -> tuple[np.ndarray, np.ndarray, int]:
        """(begin RVAs, end RVAs, file offset of the table)."""
        if SECTION_RUNTIME_FUNCTIONS not in self.image.sections:
            return np.zeros(0, np.int64), np.zeros(0, np.int64), 0
        rva, size = self.image.sections[SECTION_RUNTIME_FUNCTIONS]
        off = to_offset(self.pe, rva, size, "RuntimeFunctions")
        self.rf_offset = off
        width = 3 if self.image.architecture == "X64" else 2
        n = size // (4 * width)
        table = np.frombuffer(self.data, dtype="<u4", count=n * width, offset=off)
        table = table.reshape(n, width).astype(np.int64)
        begins = table[:, 0].copy()
        if self.image.architecture == "ARM":
            begins &= ~1  # the Thumb bit
        ends = table[:, 1].copy() if width == 3 else self._ends_from_unwind(begins, table[:, 1])
        self._check_ranges(begins, ends, off, 4 * width)
        return begins, ends, off

    def _ends_from_unwind(self, begins: np.ndarray, unwind: np.ndarray) -> np.ndarray:
        """End RVAs where the record has none: ARM64 unwind data gives the function
        length; elsewhere the next function's start (bounded by the section)."""
        n = len(begins)
        ends = np.empty(n, np.int64)
        ends[:-1] = begins[1:] if n else ends[:-1]
        if n:
            ends[-1] = self._section_end(int(begins[-1]))
        if self.image.architecture == "ARM64":
            for i in range(n):
                u = int(unwind[i])
                if u & 3:  # packed unwind data: FunctionLength in bits 2..12, in words
                    ends[i] = begins[i] + ((u >> 2) & 0x7FF) * 4
                else:
                    off = to_offset(self.pe, u, 4, "ARM64 unwind data", self.rf_offset + 8 * i)
                    (word,) = struct.unpack_from("<I", self.data, off)
                    ends[i] = begins[i] + (word & 0x3FFFF) * 4
        return ends

    def _section_end(self, rva: int) -> int:
        for s in self.pe.sections:
            if s.virtual_address <= rva < s.virtual_address + max(s.virtual_size, s.raw_size):
                return s.virtual_address + max(s.virtual_size, s.raw_size)
        return rva

    def _check_ranges(self, begins: np.ndarray, ends: np.ndarray, off: int, size: int) -> None:
        if not len(begins):
            return
        bad = np.flatnonzero(ends <= begins)
        if len(bad):
            i = int(bad[0])
            raise self.fail(
                "malformed",
                f"runtime function {i} ends (0x{int(ends[i]):x}) at or before it begins "
                f"(0x{int(begins[i]):x})",
                off + size * i,
            )
        spans = [
            (s.virtual_address, s.virtual_address + max(s.virtual_size, s.raw_size))
            for s in self.pe.sections
        ]
        inside = np.zeros(len(begins), bool)
        for lo, hi in spans:
            inside |= (begins >= lo) & (ends <= hi)
        if not inside.all():
            i = int(np.flatnonzero(~inside)[0])
            raise self.fail(
                "malformed",
                f"runtime function {i} (RVA 0x{int(begins[i]):x}..0x{int(ends[i]):x}) "
                "lies outside every section",
                off + size * i,
            )

    def entry_index(self, reader: NativeReader, offset: int, n_functions: int) -> int:
        """The runtime-function index an entry-point element encodes (fixups skipped)."""
        value, _ = reader.unsigned(offset, "entry point")
        index = value >> 2 if value & 1 else value >> 1
        if index >= n_functions:
            raise self.fail(
                "malformed",
                f"entry point names runtime function {index}; the image has {n_functions}",
                offset,
            )
        return index

    def collect(self) -> list[MethodBody]:
        begins, ends, _ = self.runtime_functions()
        n = len(begins)
        names: dict[int, str] = {}
        for comp in self.image.components:
            reader = self.section_reader(comp.sections, SECTION_METHODDEF_ENTRYPOINTS)
            if reader is None or comp.metadata is None:
                continue
            md = comp.metadata
            n_defs = md.count(METHODDEF)
            resolver = self.names.resolver(comp)
            for index, element in native_array(reader, reader.start):
                rf = self.entry_index(reader, element, n)
                if rf not in names:
                    rid = index + 1
                    if rid > n_defs:
                        raise self.fail(
                            "malformed",
                            f"MethodDefEntryPoints has an entry for MethodDef {rid}; "
                            f"the metadata has {n_defs}",
                            element,
                        )
                    names[rf] = self.names.methoddef_name(md, rid, resolver)
        reader = self.section_reader(self.image.sections, SECTION_INSTANCE_ENTRYPOINTS)
        if reader is not None:
            for _, entry in native_hashtable(reader, reader.start):
                name, after = self.names.instance_name(entry, reader.end)
                rf = self.entry_index(reader, after, n)
                names.setdefault(rf, name)
        cold_of = self.hot_cold(n)
        first_cold = min((c for c, _ in cold_of.values()), default=n)
        entries = sorted(names)
        is_entry = np.zeros(n + 1, bool)
        is_entry[entries] = True
        is_entry[min(first_cold, n) :] = True
        # each body runs from its entry to just before the next entry (or first cold part)
        nxt = np.flatnonzero(is_entry)
        out = []
        for rf in entries:
            last = int(nxt[np.searchsorted(nxt, rf, side="right")]) - 1
            start = int(begins[rf])
            length = int(ends[last]) - start
            cold: tuple[tuple[int, int], ...] = ()
            if rf in cold_of:
                c_first, c_last = cold_of[rf]
                c_start = int(begins[c_first])
                cold = ((c_start, int(ends[c_last]) - c_start),)
            out.append(MethodBody(start, length, names[rf], cold))
        out.sort(key=lambda m: m.rva)
        return out

    def hot_cold(self, n: int) -> dict[int, tuple[int, int]]:
        """hot runtime-function index → (first, last) cold index (R2R 8.0 HotColdMap)."""
        if SECTION_HOT_COLD_MAP not in self.image.sections:
            return {}
        rva, size = self.image.sections[SECTION_HOT_COLD_MAP]
        off = to_offset(self.pe, rva, size, "HotColdMap")
        pairs = np.frombuffer(self.data, "<u4", (size // 8) * 2, off).reshape(-1, 2).tolist()
        out = {}
        for i, (cold, hot) in enumerate(pairs):
            end = pairs[i + 1][0] if i + 1 < len(pairs) else n
            if not (hot < n and cold < end <= n):
                raise self.fail("malformed", f"HotColdMap entry {i} ({cold}, {hot}) is out of "
                                f"range ({n} runtime functions)", off + 8 * i)  # fmt: skip
            out[hot] = (cold, end - 1)
        return out
