"""Type and method signatures → crossgen2's perf-map spelling (``TypeString``).

crossgen2 names a method ``[Ret ]Owner::Name(P1, P2)`` (return type omitted when void),
every type as ``Namespace.Name`` with nested types joined by ``+``, instantiations as
``Def`1[A, B]``, ``*`` / ``&`` / ``[]`` / ``[,]`` / ``[*]`` suffixes, function pointers as
``Ret (Args)``, and the shared-generics placeholder as ``System.__Canon`` (spec §1.7).
The signatures are ECMA-335 blobs (II.23.2) plus ReadyToRun's "zapsig" element types
(``CANON``, ``MODULE`` override, native value type) used in instance entry points.

Decoding is bounded: recursion is limited to :data:`MAX_DEPTH` (a TypeSpec naming
itself would otherwise recurse forever), counts are checked against the bytes left.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from profkit.errors import FormatError
from profkit.formats.r2r.metadata import TYPEDEF, TYPEREF, TYPESPEC, Metadata, read_compressed

MAX_DEPTH = 48
MAX_RANK = 32  # the runtime's limit on array rank
#: Types one signature may expand to (TypeSpecs referring to TypeSpecs could otherwise
#: grow exponentially within MAX_DEPTH) and the longest name it may produce.
MAX_TYPES = 4096
MAX_NAME = 1 << 16

_PRIMITIVES = {
    0x01: "System.Void", 0x02: "System.Boolean", 0x03: "System.Char", 0x04: "System.SByte",
    0x05: "System.Byte", 0x06: "System.Int16", 0x07: "System.UInt16", 0x08: "System.Int32",
    0x09: "System.UInt32", 0x0A: "System.Int64", 0x0B: "System.UInt64", 0x0C: "System.Single",
    0x0D: "System.Double", 0x0E: "System.String", 0x16: "System.TypedReference",
    0x18: "System.IntPtr", 0x19: "System.UIntPtr", 0x1C: "System.Object",
    0x3E: "System.__Canon",  # ELEMENT_TYPE_CANON_ZAPSIG
}  # fmt: skip
_PTR, _BYREF, _VALUETYPE, _CLASS, _VAR, _ARRAY, _GENERICINST = 0x0F, 0x10, 0x11, 0x12, 0x13, 0x14, 0x15  # fmt: skip
_FNPTR, _SZARRAY, _MVAR, _CMOD_REQD, _CMOD_OPT = 0x1B, 0x1D, 0x1E, 0x1F, 0x20
_SENTINEL, _PINNED = 0x41, 0x45
_VAR_ZAPSIG, _NATIVE_VALUETYPE_ZAPSIG, _MODULE_ZAPSIG = 0x3B, 0x3D, 0x3F

#: Maps a module-override index (0 = the signature's own module) to that module's
#: metadata, or None when it cannot be found (names then say which module).
ModuleResolver = Callable[[int], Metadata | None]


class SigReader:
    """Reads one signature blob ``data[pos:end]`` in the context of ``md``.

    ``type_args`` / ``method_args`` substitute ``!n`` / ``!!n`` (crossgen2 prints the
    instantiated signature of the compiled method body).
    """

    __slots__ = (
        "budget", "data", "end", "md", "method_args", "path", "pos", "resolve", "type_args",
    )  # fmt: skip

    def __init__(
        self,
        md: Metadata | None,
        pos: int,
        end: int,
        *,
        data: bytes,
        path: str | None,
        resolve: ModuleResolver | None = None,
        type_args: Sequence[str] = (),
        method_args: Sequence[str] = (),
        budget: list[int] | None = None,
    ) -> None:
        self.budget = budget if budget is not None else [MAX_TYPES]
        self.md = md
        self.data = data
        self.path = path
        self.pos = pos
        self.end = end
        self.resolve = resolve
        self.type_args = type_args
        self.method_args = method_args

    def fail(self, kind: str, detail: str) -> FormatError:
        return FormatError(kind, detail, path=self.path, offset=self.pos)  # type: ignore[arg-type]

    def byte(self) -> int:
        if self.pos >= self.end:
            raise self.fail("truncated", "signature runs past its end")
        b = self.data[self.pos]
        self.pos += 1
        return b

    def uint(self) -> int:
        value, self.pos = read_compressed(self.data, self.pos, self.end, self.path)
        return value

    def count(self, what: str) -> int:
        """A count of following items, each at least one byte: checked against the rest."""
        n = self.uint()
        if n > self.end - self.pos:
            raise self.fail("too_large", f"{what}: {n} declared, {self.end - self.pos} bytes left")
        return n

    # -- types -----------------------------------------------------------------------------

    def type(self, depth: int = 0) -> str:
        """Decode one type and return its crossgen2 name."""
        if depth > MAX_DEPTH:
            raise self.fail("malformed", f"type signature nests deeper than {MAX_DEPTH} levels")
        self.budget[0] -= 1
        if self.budget[0] < 0:
            raise self.fail("too_large", f"signature expands to more than {MAX_TYPES} types")
        name = self._type(depth)
        if len(name) > MAX_NAME:
            raise self.fail(
                "too_large", f"signature names a type longer than {MAX_NAME} characters"
            )
        return name

    def _type(self, depth: int) -> str:
        et = self.byte()
        prim = _PRIMITIVES.get(et)
        if prim is not None:
            return prim
        if et in (_CLASS, _VALUETYPE):
            return self.token_type(self.uint(), depth)
        if et == _GENERICINST:
            kind = self.byte()
            if kind not in (_CLASS, _VALUETYPE):
                raise self.fail("malformed", f"GENERICINST of element type 0x{kind:02x}")
            definition = self.token_type(self.uint(), depth)
            n = self.count("generic arguments")
            args = [self.type(depth + 1) for _ in range(n)]
            return f"{definition}[{', '.join(args)}]"
        if et == _PTR:
            return self.type(depth + 1) + "*"
        if et == _BYREF:
            return self.type(depth + 1) + "&"
        if et == _SZARRAY:
            return self.type(depth + 1) + "[]"
        if et == _ARRAY:
            element = self.type(depth + 1)
            rank = self.uint()
            if not 1 <= rank <= MAX_RANK:
                raise self.fail("malformed", f"array rank {rank} (1..{MAX_RANK} allowed)")
            for _ in range(self.count("array sizes")):
                self.uint()
            for _ in range(self.count("array lower bounds")):
                self.uint()
            return f"{element}[{'*' if rank == 1 else ',' * (rank - 1)}]"
        if et == _VAR:
            n = self.uint()
            return self.type_args[n] if n < len(self.type_args) else f"!{n}"
        if et == _MVAR:
            n = self.uint()
            return self.method_args[n] if n < len(self.method_args) else f"!!{n}"
        if et in (_CMOD_REQD, _CMOD_OPT):
            self.uint()  # the modifier type: not part of the name
            return self.type(depth + 1)
        if et in (_PINNED, _NATIVE_VALUETYPE_ZAPSIG):
            return self.type(depth + 1)
        if et == _FNPTR:
            ret, params = self.method(depth + 1)
            return f"{ret} ({', '.join(params)})"
        if et == _MODULE_ZAPSIG:
            index = self.uint()
            md = self.resolve(index) if self.resolve is not None and index else self.md
            if index and self.resolve is None:
                md = None
            saved = self.md
            self.md = md
            try:
                name = self.type(depth + 1)
            finally:
                self.md = saved
            return name
        if et == _VAR_ZAPSIG:
            return f"!{self.uint()}"
        raise self.fail("malformed", f"unknown element type 0x{et:02x} in a signature")

    def token_type(self, coded: int, depth: int) -> str:
        """A TypeDefOrRefOrSpecEncoded value → name (II.23.2.8)."""
        tag, rid = coded & 3, coded >> 2
        md = self.md
        if md is None:
            return f"[unresolved module]{('TypeDef', 'TypeRef', 'TypeSpec', '?')[tag]}#{rid}"
        if tag == 0:
            md.row(TYPEDEF, rid, "type signature TypeDef")
            return md.typedef_name(rid)
        if tag == 1:
            md.row(TYPEREF, rid, "type signature TypeRef")
            return md.typeref_name(rid)
        if tag == 2:
            i = md.row(TYPESPEC, rid, "type signature TypeSpec")
            pos, length = md.blob(md.table(TYPESPEC).column("Signature")[i])
            inner = SigReader(
                md, pos, pos + length, data=md.data, path=self.path, resolve=self.resolve,
                type_args=self.type_args, method_args=self.method_args, budget=self.budget,
            )  # fmt: skip
            return inner.type(depth + 1)
        raise self.fail("malformed", f"TypeDefOrRef tag 3 (value 0x{coded:x})")

    # -- methods ---------------------------------------------------------------------------

    def method(self, depth: int = 0) -> tuple[str, list[str]]:
        """A MethodDefSig/MethodRefSig: (return type, parameter types)."""
        conv = self.byte()
        if conv & 0x10:  # GENERIC: the generic parameter count
            self.uint()
        n = self.count("parameters")
        ret = self.type(depth + 1)
        params = []
        for _ in range(n):
            if self.pos < self.end and self.data[self.pos] == _SENTINEL:
                self.pos += 1  # vararg: the fixed part ends here, the types go on
            params.append(self.type(depth + 1))
        if len(ret) + sum(len(p) + 2 for p in params) > MAX_NAME:
            raise self.fail("too_large", f"method signature longer than {MAX_NAME} characters")
        return ret, params


def format_method(owner: str, name: str, ret: str, params: Sequence[str]) -> str:
    """crossgen2's ``FormatMethodName``: ``[Ret ]Owner::Name(P1, P2)``, no ret when void."""
    head = "" if ret == "System.Void" else ret + " "
    return f"{head}{owner}::{name}({', '.join(params)})"
