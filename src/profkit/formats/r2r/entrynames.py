"""Names of R2R entry points, as crossgen2 writes them in its perf map.

Why a module of its own: naming is signature decoding (MethodDef and MemberRef tokens,
instance-entry-point signatures with their owner type, instantiation and module
override), a concern apart from where method bodies lie (``methods.py``). The
signature grammar and type names themselves are ``signatures.py``'s.
"""

from __future__ import annotations

from profkit.formats.r2r.image import (
    SECTION_MANIFEST_METADATA,
    Component,
    R2RImage,
    to_offset,
)
from profkit.formats.r2r.metadata import (
    ASSEMBLYREF,
    MEMBERREF,
    METHODDEF,
    TYPEDEF,
    TYPEREF,
    TYPESPEC,
    Metadata,
)
from profkit.formats.r2r.signatures import ModuleResolver, SigReader, format_method

_SIG_UNBOXING = 0x01
_SIG_METHOD_INSTANTIATION = 0x04
_SIG_SLOT = 0x08
_SIG_MEMBERREF = 0x10
_SIG_CONSTRAINED = 0x20
_SIG_OWNER_TYPE = 0x40
_SIG_UPDATE_CONTEXT = 0x80


class EntryNamer:
    """Names the entry points of one image (MethodDef rows and instance signatures)."""

    def __init__(self, image: R2RImage) -> None:
        self.image = image
        self.pe = image.pe
        self.path = image.path
        self.data = image.pe.data

    def resolver(self, comp: Component) -> ModuleResolver:
        """Module-override index → metadata (readytorun-format.md, ManifestMetadata)."""
        image = self.image
        md = comp.metadata

        def resolve(index: int) -> Metadata | None:
            if image.composite:
                offset = 2 if (image.major, image.minor) >= (6, 3) else 1
                i = index - offset
                if 0 <= i < len(image.components):
                    return image.components[i].metadata
                return None
            if md is None:
                return None
            n_refs = md.count(ASSEMBLYREF)
            if index == 0:
                return md
            if index <= n_refs:
                return image.find_assembly(md.assembly_ref_name(index))
            manifest = self.manifest()
            rid = index - n_refs - 1
            if manifest is not None and 1 <= rid <= manifest.count(ASSEMBLYREF):
                return image.find_assembly(manifest.assembly_ref_name(rid))
            return None

        return resolve

    def manifest(self) -> Metadata | None:
        if SECTION_MANIFEST_METADATA not in self.image.sections:
            return None
        rva, size = self.image.sections[SECTION_MANIFEST_METADATA]
        return Metadata(self.data, to_offset(self.pe, rva, size, "manifest"), size, path=self.path)

    def methoddef_name(
        self,
        md: Metadata,
        rid: int,
        resolve: ModuleResolver,
        owner: str | None = None,
        type_args: tuple[str, ...] = (),
        method_args: tuple[str, ...] = (),
    ) -> str:
        if owner is None:
            owner_rid = md.method_owner(rid)
            owner = md.typedef_name(owner_rid) if owner_rid else "<Module>"
        pos, length = md.method_signature(rid)
        sig = SigReader(
            md, pos, pos + length, data=md.data, path=self.path, resolve=resolve,
            type_args=type_args, method_args=method_args,
        )  # fmt: skip
        ret, params = sig.method()
        return format_method(owner, md.method_name(rid), ret, params)

    def instance_name(self, offset: int, end: int) -> tuple[str, int]:
        """Decode one InstanceMethodEntryPoints signature: (name, offset after it)."""
        comp = self.image.components[0]
        md = None if self.image.composite else comp.metadata
        resolve = self.resolver(comp)
        sig = SigReader(md, offset, end, data=self.data, path=self.path, resolve=resolve)
        flags = sig.uint()
        if flags & _SIG_UPDATE_CONTEXT:
            md = resolve(sig.uint())
            sig.md = md
        owner = None
        type_args: tuple[str, ...] = ()
        if flags & _SIG_OWNER_TYPE:
            owner_start = sig.pos
            owner = sig.type()
            type_args = self._owner_args(sig, owner_start)
            if self._owner_module is not None:  # the token lives in the owner's module
                md = self._owner_module
        if flags & _SIG_SLOT:
            slot = sig.uint()
            name = f"{owner or '?'}::<slot {slot}>()"
            return name, self._skip_tail(sig, flags)
        rid = sig.uint()
        method_args: tuple[str, ...] = ()
        if flags & _SIG_METHOD_INSTANTIATION:
            n = sig.count("method instantiation")
            method_args = tuple(sig.type() for _ in range(n))
        if flags & _SIG_CONSTRAINED:
            sig.type()
        if md is None:
            token = "MemberRef" if flags & _SIG_MEMBERREF else "MethodDef"
            return f"{owner or '?'}::[unresolved {token} #{rid}]()", sig.pos
        if flags & _SIG_MEMBERREF:
            name = self.memberref_name(md, rid, resolve, owner, type_args, method_args)
        else:
            md.row(METHODDEF, rid, "instance entry point MethodDef")
            name = self.methoddef_name(md, rid, resolve, owner, type_args, method_args)
        return name, sig.pos

    _owner_module: Metadata | None = None

    def _owner_args(self, sig: SigReader, start: int) -> tuple[str, ...]:
        """Re-read the owner type to get its instantiation arguments and its module."""
        probe = SigReader(sig.md, start, sig.end, data=sig.data, path=sig.path, resolve=sig.resolve)
        self._owner_module = None
        et = probe.byte()
        if et == 0x3F:  # MODULE_ZAPSIG
            index = probe.uint()
            probe.md = sig.resolve(index) if sig.resolve is not None else None
            self._owner_module = probe.md
            et = probe.byte()
        if et != 0x15:  # GENERICINST
            return ()
        probe.byte()
        probe.uint()
        n = probe.count("generic arguments")
        return tuple(probe.type() for _ in range(n))

    def _skip_tail(self, sig: SigReader, flags: int) -> int:
        if flags & _SIG_CONSTRAINED:
            sig.type()
        return sig.pos

    def memberref_name(
        self,
        md: Metadata,
        rid: int,
        resolve: ModuleResolver,
        owner: str | None,
        type_args: tuple[str, ...],
        method_args: tuple[str, ...],
    ) -> str:
        i = md.row(MEMBERREF, rid, "instance entry point MemberRef")
        t = md.table(MEMBERREF)
        parent = t.column("Class")[i]
        if owner is None:
            tag, prid = parent & 7, parent >> 3
            owner = _parent_name(md, tag, prid, resolve, self.path)
        pos, length = md.blob(t.column("Signature")[i])
        sig = SigReader(
            md, pos, pos + length, data=md.data, path=self.path, resolve=resolve,
            type_args=type_args, method_args=method_args,
        )  # fmt: skip
        ret, params = sig.method()
        return format_method(owner, md.string(t.column("Name")[i]), ret, params)


def _parent_name(
    md: Metadata, tag: int, rid: int, resolve: ModuleResolver, path: str | None
) -> str:
    if tag == 0:
        md.row(TYPEDEF, rid, "MemberRef parent")
        return md.typedef_name(rid)
    if tag == 1:
        md.row(TYPEREF, rid, "MemberRef parent")
        return md.typeref_name(rid)
    if tag == 4:
        i = md.row(TYPESPEC, rid, "MemberRef parent")
        pos, length = md.blob(md.table(TYPESPEC).column("Signature")[i])
        return SigReader(md, pos, pos + length, data=md.data, path=path, resolve=resolve).type()
    return "<Module>"
