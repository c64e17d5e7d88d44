"""Naming the target's code objects: (code address, instruction) words to
``module.qualname``, file and line.

Code objects are cached by address (name, file, first line, location table), and whole
stacks by their raw (code, instruction) words. A code object lives as long as a frame runs
it, but its address is reused once it is freed (start-up frees many): each time a stack
not seen before is named, every code address in it is checked against the cached code's
signature (type, name, file and table pointers, first line), and a mismatch drops the
stack cache. A stack seen before is trusted: that is the trade that keeps a sample cheap.
Kept apart from the walk (reader.py) because naming is per distinct stack, not per sample.
"""

from __future__ import annotations

import struct

from profkit._record import field, record
from profkit.calltree.model import Frame
from profkit.sampler.errors import ReadFault
from profkit.sampler.layout import Layout
from profkit.sampler.linetable import line_for
from profkit.sampler.memory import Memory
from profkit.sampler.naming import Namer

_MAX_STRING = 4096
_MAX_LINETABLE = 1 << 20
_u64 = struct.Struct("<Q").unpack_from
_i32 = struct.Struct("<i").unpack_from
_pairs = struct.Struct("=QQ").iter_unpack


@record(frozen=True, eq=False)
class CodeInfo:
    """What the sampler keeps about one code object of the target."""

    name: str  #: ``module.qualname``
    module: str
    filename: str
    first_line: int
    linetable: bytes
    frame: Frame  #: the profile's frame (first line, as in-process profiles have it)
    signature: tuple[int, ...] = ()  #: see StackReader._signature
    lines: dict[int, int] = field(default_factory=dict)  #: code-unit offset → line

    def line(self, offset: int) -> int:
        found = self.lines.get(offset)
        if found is None:
            found = line_for(self.linetable, self.first_line, offset)
            if len(self.lines) < 65536:
                self.lines[offset] = found
        return found


#: A resolved stack: (code, line) pairs, innermost first.
Stack = tuple[tuple[CodeInfo, int], ...]


class CodeNamer:
    """Names raw walks of one process (see the module's docstring for the caches)."""

    def __init__(self, mem: Memory, layout: Layout, code_type: int, namer: Namer) -> None:
        self.mem = mem
        self.layout = layout
        self.code_type = code_type  #: address of ``PyCode_Type`` in the target (0: unknown)
        self.pid = mem.pid
        self.namer = namer
        self._codes: dict[int, CodeInfo] = {}
        self._stacks: dict[bytes, Stack] = {}
        self.reused = 0  #: code addresses found holding another code object than cached

    def cached(self, key: bytes) -> Stack | None:
        """The named stack for a raw walk seen before, else None."""
        return self._stacks.get(key)

    def resolve(self, key: bytes) -> Stack:
        """Name every frame of a raw walk (codes cached by address; the result by key)."""
        codes = self._codes
        adaptive = self.layout.code_adaptive
        out = []
        checked: set[int] = set()
        for code, instr in _pairs(key):
            info = codes.get(code)
            # A new stack: make sure each code address still holds the code we named
            # (start-up frees many code objects, and their addresses are reused).
            if info is not None and code not in checked and self._signature(code) != info.signature:
                self._stacks.clear()
                self.reused += 1
                info = None
            if info is None:
                info = self._code(code)
            checked.add(code)
            offset = (instr - code - adaptive) >> 1
            out.append((info, info.line(offset if offset >= 0 else 0)))
        stack = tuple(out)
        if len(self._stacks) > 100_000:
            self._stacks.clear()
        self._stacks[key] = stack
        return stack

    def _signature(self, address: int, raw: bytes | None = None) -> tuple[int, ...]:
        """What identifies the code object at ``address``: its type, name, file and table
        pointers and first line (a new code object at a reused address differs in them)."""
        lay = self.layout
        if raw is None:
            raw = self.mem.read(address, lay.code_span)
        return (
            _u64(raw, lay.object_type)[0],
            _u64(raw, lay.code_filename)[0],
            _u64(raw, lay.code_qualname)[0],
            _u64(raw, lay.code_linetable)[0],
            _i32(raw, lay.code_firstlineno)[0],
        )

    def _code(self, address: int) -> CodeInfo:
        lay = self.layout
        raw = self.mem.read(address, lay.code_span)
        if self.code_type and _u64(raw, lay.object_type)[0] != self.code_type:
            raise ReadFault(f"pid {self.pid}: {address:#x} is not a code object")
        filename = self.string(_u64(raw, lay.code_filename)[0])
        qualname = self.string(_u64(raw, lay.code_qualname)[0])
        first = _i32(raw, lay.code_firstlineno)[0]
        table_at = _u64(raw, lay.code_linetable)[0]
        size = _u64(self.mem.read(table_at + lay.bytes_size, 8), 0)[0] if table_at else 0
        table = (
            self.mem.read(table_at + lay.bytes_data, size) if 0 < size <= _MAX_LINETABLE else b""
        )
        module = self.namer.module(filename)
        name = f"{module}.{qualname}" if module else qualname
        info = CodeInfo(
            name,
            module,
            filename,
            first,
            table,
            Frame(name, filename, first),
            self._signature(0, raw),
        )
        if len(self._codes) > 200_000:
            self._codes.clear()
        self._codes[address] = info
        return info

    def string(self, address: int) -> str:
        """A ``str`` object of the target (compact strings only, as code names are)."""
        if not address:
            return ""
        lay = self.layout
        raw = self.mem.read(address, lay.unicode_compact_size)
        length = _u64(raw, lay.unicode_length)[0]
        state = int.from_bytes(raw[lay.unicode_state : lay.unicode_state + 4], "little")
        kind = (state >> lay.unicode_kind_bit) & 7
        if not (state >> lay.unicode_compact_bit) & 1 or kind not in (1, 2, 4):
            return "<?>"
        length = min(length, _MAX_STRING)
        if (state >> lay.unicode_ascii_bit) & 1:
            data = self.mem.read(address + lay.unicode_ascii_size, length)
            return data.decode("ascii", "replace")
        data = self.mem.read(address + lay.unicode_compact_size, length * kind)
        codec = {1: "latin-1", 2: "utf-16-le", 4: "utf-32-le"}[kind]
        return data.decode(codec, "replace")
