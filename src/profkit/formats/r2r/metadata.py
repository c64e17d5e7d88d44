"""The ECMA-335 metadata an R2R map needs: type, method and assembly names, signatures.

Written here rather than taken from ``dnfile`` (see docs/perfmap.md, "Metadata reader"):
dnfile needed 2.9 s to open System.Private.CoreLib (our whole map budget is 2 s), it
printed warnings to stdout on a valid framework image, and like ``pefile`` under it it is
lenient by design, where our readers must stop at the first bad byte with its offset.

Only the tables are parsed (all 45 row layouts are needed to find where each table
starts); rows of the few tables we read are decoded in one numpy pass each, and names
and signature blobs are read lazily, so a 20,000-method assembly costs milliseconds.
Every size and count is checked against the bytes that hold it before use.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

import numpy as np

from profkit.errors import FormatError
from profkit.formats._binary import Cursor
from profkit.formats.r2r.schema import (
    ASSEMBLY,
    ASSEMBLYREF,
    EXPORTEDTYPE,
    FIELD,
    FIELDPTR,
    MEMBERREF,
    METHODDEF,
    METHODPTR,
    METHODSPEC,
    MODULE,
    MODULEREF,
    N_TABLES,
    NESTEDCLASS,
    PARAM,
    SCHEMA,
    TYPEDEF,
    TYPEREF,
    TYPESPEC,
    row_dtype,
)

# The schema is data of its own (schema.py); the table numbers are re-exported here,
# where signatures.py, entrynames.py and the tests have always imported them.
__all__ = [
    "ASSEMBLY",
    "ASSEMBLYREF",
    "EXPORTEDTYPE",
    "FIELD",
    "FIELDPTR",
    "MAX_NESTING",
    "MEMBERREF",
    "METHODDEF",
    "METHODPTR",
    "METHODSPEC",
    "MODULE",
    "MODULEREF",
    "NESTEDCLASS",
    "PARAM",
    "TYPEDEF",
    "TYPEREF",
    "TYPESPEC",
    "Metadata",
    "Table",
    "read_compressed",
]

#: Deepest nesting followed when naming a type; real code nests a handful of levels.
MAX_NESTING = 64


def _fail(path: str | None, kind: str, detail: str, offset: int) -> FormatError:
    return FormatError(kind, detail, path=path, offset=offset)  # type: ignore[arg-type]


@dataclass
class Table:
    """One table's rows as a numpy structured array (1-based row ids map to ``rows[rid-1]``)."""

    number: int
    offset: int
    row_size: int
    rows: np.ndarray
    #: per-column python lists, filled on first use
    _columns: dict[str, list[int]] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.rows)

    def column(self, name: str) -> list[int]:
        col = self._columns.get(name)
        if col is None:
            col = self.rows[name].astype(np.int64).tolist()
            self._columns[name] = col
        return col


class Metadata:
    """The parsed ``#~`` tables and heaps of one metadata block.

    ``data`` is the whole file; ``offset``/``size`` locate the metadata root in it, so
    every error names a file offset.
    """

    def __init__(self, data: bytes, offset: int, size: int, *, path: str | None) -> None:
        self.data = data
        self.path = path
        self.offset = offset
        if offset < 0 or size < 0 or offset + size > len(data):
            raise _fail(path, "truncated", "metadata runs past the end of the file", offset)
        root = Cursor(data, offset, offset + size, path=path, error=FormatError)
        if root.u32("metadata signature") != 0x424A5342:
            raise root.fail("bad_magic", "metadata root signature is not 'BSJB'", offset)
        root.skip(8, "metadata version")  # major, minor, reserved
        version_len = root.u32("metadata version length")
        root.skip(version_len, "metadata version string")
        root.skip(2, "metadata flags")
        n_streams = root.unpack("<H", "stream count")[0]
        root.check_count(n_streams, 12, "stream headers")
        streams: dict[str, tuple[int, int]] = {}
        for _ in range(n_streams):
            s_off, s_size = root.unpack("<II", "stream header")
            raw = bytes(data[root.pos : min(root.end, root.pos + 32)])
            name, nul, _ = raw.partition(b"\0")
            if not nul:
                raise root.fail("malformed", "stream name is not NUL-terminated in 32 bytes")
            root.skip((len(name) + 4) // 4 * 4, "stream name")
            if s_off + s_size > size:
                raise root.fail("truncated", f"stream {name!r} runs past the metadata")
            streams.setdefault(name.decode("latin-1"), (offset + s_off, s_size))
        self.streams = streams
        self.strings = streams.get("#Strings", (0, 0))
        self.blobs = streams.get("#Blob", (0, 0))
        self.guids = streams.get("#GUID", (0, 0))
        tables = streams.get("#~") or streams.get("#-")
        if tables is None:
            raise _fail(path, "malformed", "metadata has no #~ table stream", offset)
        self.tables = self._read_tables(*tables)
        self._string_cache: dict[int, str] = {}
        self._type_names: dict[tuple[int, int], str] = {}
        self._enclosing: dict[int, int] | None = None
        self._method_owner: list[int] | None = None

    # -- tables ----------------------------------------------------------------------------

    def _read_tables(self, start: int, size: int) -> dict[int, Table]:
        cur = Cursor(self.data, start, start + size, path=self.path, error=FormatError)
        cur.skip(6, "table stream header")  # reserved, major, minor
        heap_sizes = cur.u8("HeapSizes")
        cur.skip(1, "table stream header")
        valid = cur.u64("Valid")
        cur.skip(8, "Sorted")
        present = [t for t in range(64) if valid >> t & 1]
        if any(t >= N_TABLES for t in present):
            bad = next(t for t in present if t >= N_TABLES)
            raise cur.fail("malformed", f"table 0x{bad:02x} is not an ECMA-335 table")
        cur.check_count(len(present), 4, "table row counts")
        counts = [0] * N_TABLES
        for t in present:
            counts[t] = cur.u32(f"row count of table 0x{t:02x}")
        if heap_sizes & 0x40:
            cur.skip(4, "extra table data")
        self.row_counts = counts
        tables: dict[int, Table] = {}
        for t in present:
            dtype = row_dtype(t, counts, heap_sizes)
            n = counts[t]
            cur.check_count(n, dtype.itemsize, f"table 0x{t:02x} rows")
            rows = np.frombuffer(self.data, dtype=dtype, count=n, offset=cur.pos)
            tables[t] = Table(t, cur.pos, dtype.itemsize, rows)
            cur.pos += n * dtype.itemsize
        return tables

    def count(self, table: int) -> int:
        return self.row_counts[table]

    def table(self, number: int) -> Table:
        t = self.tables.get(number)
        if t is None:
            empty = np.zeros(0, dtype=np.dtype([(n, "<u4") for n, _ in SCHEMA[number]]))
            t = Table(number, 0, 0, empty)
            self.tables[number] = t
        return t

    def row(self, table: int, rid: int, what: str) -> int:
        """Check a 1-based row id and return its 0-based index."""
        if not 1 <= rid <= self.row_counts[table]:
            raise _fail(
                self.path,
                "malformed",
                f"{what}: row {rid} of table 0x{table:02x} does not exist "
                f"({self.row_counts[table]} rows)",
                self.tables[table].offset if table in self.tables else self.offset,
            )
        return rid - 1

    # -- heaps -----------------------------------------------------------------------------

    def string(self, index: int) -> str:
        """A ``#Strings`` entry (UTF-8, NUL-terminated)."""
        cached = self._string_cache.get(index)
        if cached is not None:
            return cached
        start, size = self.strings
        if index >= size:
            raise _fail(self.path, "malformed", f"string index 0x{index:x} is outside #Strings",
                        start)  # fmt: skip
        end = self.data.find(b"\0", start + index, start + size)
        if end < 0:
            raise _fail(self.path, "truncated", "unterminated #Strings entry", start + index)
        text = self.data[start + index : end].decode("utf-8", "surrogateescape")
        self._string_cache[index] = text
        return text

    def blob(self, index: int) -> tuple[int, int]:
        """(file offset, length) of a ``#Blob`` entry."""
        start, size = self.blobs
        if index >= size:
            raise _fail(self.path, "malformed", f"blob index 0x{index:x} is outside #Blob", start)
        pos = start + index
        length, pos = read_compressed(self.data, pos, start + size, self.path)
        if pos + length > start + size:
            raise _fail(self.path, "truncated", "#Blob entry runs past the heap", pos)
        return pos, length

    def guid(self, index: int) -> bytes | None:
        if index == 0:
            return None
        start, size = self.guids
        if index * 16 > size:
            raise _fail(self.path, "malformed", f"GUID index {index} is outside #GUID", start)
        at = start + (index - 1) * 16
        return bytes(self.data[at : at + 16])

    # -- names -----------------------------------------------------------------------------

    def mvid(self) -> bytes | None:
        """The module's MVID as stored (= ``Guid.ToByteArray()`` order)."""
        if not self.row_counts[MODULE]:
            return None
        return self.guid(self.table(MODULE).column("Mvid")[0])

    def mvid_uuid(self) -> uuid.UUID | None:
        raw = self.mvid()
        return None if raw is None else uuid.UUID(bytes_le=raw)

    def assembly_name(self) -> str | None:
        if not self.row_counts[ASSEMBLY]:
            return None
        return self.string(self.table(ASSEMBLY).column("Name")[0])

    def assembly_ref_name(self, rid: int) -> str:
        i = self.row(ASSEMBLYREF, rid, "AssemblyRef")
        return self.string(self.table(ASSEMBLYREF).column("Name")[i])

    def _enclosing_map(self) -> dict[int, int]:
        if self._enclosing is None:
            t = self.table(NESTEDCLASS)
            self._enclosing = dict(
                zip(t.column("NestedClass"), t.column("EnclosingClass"), strict=True)
            )
        return self._enclosing

    def typedef_name(self, rid: int) -> str:
        """``Namespace.Name``, nested types as ``Outer+Inner`` (crossgen2's TypeString)."""
        key = (TYPEDEF, rid)
        name = self._type_names.get(key)
        if name is not None:
            return name
        enclosing = self._enclosing_map()
        chain = []
        cur = rid
        for _ in range(MAX_NESTING):
            chain.append(cur)
            outer = enclosing.get(cur)
            if outer is None or (TYPEDEF, outer) in self._type_names:
                break
            cur = outer
        else:
            raise _fail(self.path, "malformed", f"TypeDef {rid} nests more than "
                        f"{MAX_NESTING} levels deep (a NestedClass cycle?)",
                        self.table(NESTEDCLASS).offset)  # fmt: skip
        t = self.table(TYPEDEF)
        names, spaces = t.column("Name"), t.column("Namespace")
        for r in reversed(chain):
            i = self.row(TYPEDEF, r, "TypeDef")
            outer = enclosing.get(r)
            if outer is not None:
                prefix = self._type_names.get((TYPEDEF, outer), "?")
                full = f"{prefix}+{self.string(names[i])}"
            else:
                full = _join(self.string(spaces[i]), self.string(names[i]))
            self._type_names[(TYPEDEF, r)] = full
        return self._type_names[key]

    def typeref_name(self, rid: int) -> str:
        key = (TYPEREF, rid)
        name = self._type_names.get(key)
        if name is not None:
            return name
        t = self.table(TYPEREF)
        scopes, names, spaces = t.column("ResolutionScope"), t.column("Name"), t.column("Namespace")
        chain = []
        cur = rid
        for _ in range(MAX_NESTING):
            i = self.row(TYPEREF, cur, "TypeRef")
            chain.append(cur)
            scope = scopes[i]
            if scope & 3 != 3 or (TYPEREF, scope >> 2) in self._type_names:
                break
            cur = scope >> 2
        else:
            raise _fail(self.path, "malformed", f"TypeRef {rid} nests more than {MAX_NESTING} "
                        "levels deep (a ResolutionScope cycle?)", t.offset)  # fmt: skip
        for r in reversed(chain):
            i = r - 1
            scope = scopes[i]
            if scope & 3 == 3:
                prefix = self._type_names.get((TYPEREF, scope >> 2), "?")
                full = f"{prefix}+{self.string(names[i])}"
            else:
                full = _join(self.string(spaces[i]), self.string(names[i]))
            self._type_names[(TYPEREF, r)] = full
        return self._type_names[key]

    def method_owner(self, rid: int) -> int:
        """The TypeDef row that owns MethodDef ``rid`` (from the TypeDef MethodList runs)."""
        if self._method_owner is None:
            n_methods = self.row_counts[METHODDEF]
            lists = self.table(TYPEDEF).column("MethodList")
            owner = np.zeros(n_methods + 2, dtype=np.int64)
            starts = np.array(lists, dtype=np.int64)
            if len(starts):
                starts = np.clip(starts, 1, n_methods + 1)
                # a run starts at MethodList[t]; later rows win, as the runtime reads them
                np.maximum.at(owner, starts, np.arange(1, len(starts) + 1))
                owner = np.maximum.accumulate(owner)
            self._method_owner = owner.tolist()
        self.row(METHODDEF, rid, "MethodDef")
        return int(self._method_owner[rid])

    def method_name(self, rid: int) -> str:
        i = self.row(METHODDEF, rid, "MethodDef")
        return self.string(self.table(METHODDEF).column("Name")[i])

    def method_signature(self, rid: int) -> tuple[int, int]:
        i = self.row(METHODDEF, rid, "MethodDef")
        return self.blob(self.table(METHODDEF).column("Signature")[i])

    def method_ptr(self, rid: int) -> int:
        """Follow the MethodPtr indirection of uncompressed (``#-``) metadata, if any."""
        if not self.row_counts[METHODPTR]:
            return rid
        i = self.row(METHODPTR, rid, "MethodPtr")
        return self.table(METHODPTR).column("Method")[i]


def _join(namespace: str, name: str) -> str:
    return f"{namespace}.{name}" if namespace else name


def read_compressed(data: bytes, pos: int, end: int, path: str | None) -> tuple[int, int]:
    """An ECMA-335 compressed unsigned integer (II.23.2): (value, position after it)."""
    if pos >= end:
        raise _fail(path, "truncated", "compressed integer runs past its blob", pos)
    b = data[pos]
    if b < 0x80:
        return b, pos + 1
    if b & 0xC0 == 0x80:
        if pos + 2 > end:
            raise _fail(path, "truncated", "compressed integer runs past its blob", pos)
        return (b & 0x3F) << 8 | data[pos + 1], pos + 2
    if b & 0xE0 == 0xC0:
        if pos + 4 > end:
            raise _fail(path, "truncated", "compressed integer runs past its blob", pos)
        return (b & 0x1F) << 24 | data[pos + 1] << 16 | data[pos + 2] << 8 | data[pos + 3], pos + 4
    raise _fail(path, "malformed", f"invalid compressed integer lead byte 0x{b:02x}", pos)
