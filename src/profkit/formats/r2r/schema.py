"""The ECMA-335 metadata schema (II.22, II.24.2.6): table numbers and row layouts.

Why a module of its own: this is data, the 45 row layouts and 13 coded-index kinds the
standard defines, which every table's position depends on (a table starts after all rows
of the tables before it, and a column's width depends on other tables' row counts and
the heap sizes). ``metadata.py`` reads the bytes; this says what they mean.
"""

from __future__ import annotations

from typing import Any

import numpy as np

# Table numbers (ECMA-335 II.22).
MODULE, TYPEREF, TYPEDEF, FIELDPTR, FIELD, METHODPTR, METHODDEF = (
    0x00,
    0x01,
    0x02,
    0x03,
    0x04,
    0x05,
    0x06,
)
PARAM, MEMBERREF, MODULEREF, TYPESPEC = 0x08, 0x0A, 0x1A, 0x1B
ASSEMBLY, ASSEMBLYREF, EXPORTEDTYPE, NESTEDCLASS, METHODSPEC = 0x20, 0x23, 0x27, 0x29, 0x2B  # fmt: skip
N_TABLES = 0x2D

# Coded index kinds: (tag bits, tables; -1 = unused tag value).
CODED_INDEXES: dict[str, tuple[int, tuple[int, ...]]] = {
    "TypeDefOrRef": (2, (0x02, 0x01, 0x1B)),
    "HasConstant": (2, (0x04, 0x08, 0x17)),
    "HasCustomAttribute": (5, (0x06, 0x04, 0x01, 0x02, 0x08, 0x09, 0x0A, 0x00, 0x0E, 0x17,
                               0x14, 0x11, 0x1A, 0x1B, 0x20, 0x23, 0x26, 0x27, 0x28, 0x2A,
                               0x2C, 0x2B)),
    "HasFieldMarshal": (1, (0x04, 0x08)),
    "HasDeclSecurity": (2, (0x02, 0x06, 0x20)),
    "MemberRefParent": (3, (0x02, 0x01, 0x1A, 0x06, 0x1B)),
    "HasSemantics": (1, (0x14, 0x17)),
    "MethodDefOrRef": (1, (0x06, 0x0A)),
    "MemberForwarded": (1, (0x04, 0x06)),
    "Implementation": (2, (0x26, 0x23, 0x27)),
    "CustomAttributeType": (3, (-1, -1, 0x06, 0x0A, -1)),
    "ResolutionScope": (2, (0x00, 0x1A, 0x23, 0x01)),
    "TypeOrMethodDef": (1, (0x02, 0x06)),
}  # fmt: skip

# Column kinds: "u2"/"u4" = fixed size, "s" string, "g" guid, "b" blob, int = table index, name = coded.
SCHEMA: dict[int, tuple[tuple[str, Any], ...]] = {
    0x00: (("Generation", "u2"), ("Name", "s"), ("Mvid", "g"), ("EncId", "g"), ("EncBaseId", "g")),
    0x01: (("ResolutionScope", "ResolutionScope"), ("Name", "s"), ("Namespace", "s")),
    0x02: (("Flags", "u4"), ("Name", "s"), ("Namespace", "s"), ("Extends", "TypeDefOrRef"),
           ("FieldList", 0x04), ("MethodList", 0x06)),
    0x03: (("Field", 0x04),),
    0x04: (("Flags", "u2"), ("Name", "s"), ("Signature", "b")),
    0x05: (("Method", 0x06),),
    0x06: (("RVA", "u4"), ("ImplFlags", "u2"), ("Flags", "u2"), ("Name", "s"), ("Signature", "b"),
           ("ParamList", 0x08)),
    0x07: (("Param", 0x08),),
    0x08: (("Flags", "u2"), ("Sequence", "u2"), ("Name", "s")),
    0x09: (("Class", 0x02), ("Interface", "TypeDefOrRef")),
    0x0A: (("Class", "MemberRefParent"), ("Name", "s"), ("Signature", "b")),
    0x0B: (("Type", "u2"), ("Parent", "HasConstant"), ("Value", "b")),
    0x0C: (("Parent", "HasCustomAttribute"), ("Type", "CustomAttributeType"), ("Value", "b")),
    0x0D: (("Parent", "HasFieldMarshal"), ("NativeType", "b")),
    0x0E: (("Action", "u2"), ("Parent", "HasDeclSecurity"), ("PermissionSet", "b")),
    0x0F: (("PackingSize", "u2"), ("ClassSize", "u4"), ("Parent", 0x02)),
    0x10: (("Offset", "u4"), ("Field", 0x04)),
    0x11: (("Signature", "b"),),
    0x12: (("Parent", 0x02), ("EventList", 0x14)),
    0x13: (("Event", 0x14),),
    0x14: (("EventFlags", "u2"), ("Name", "s"), ("EventType", "TypeDefOrRef")),
    0x15: (("Parent", 0x02), ("PropertyList", 0x17)),
    0x16: (("Property", 0x17),),
    0x17: (("Flags", "u2"), ("Name", "s"), ("Type", "b")),
    0x18: (("Semantics", "u2"), ("Method", 0x06), ("Association", "HasSemantics")),
    0x19: (("Class", 0x02), ("MethodBody", "MethodDefOrRef"),
           ("MethodDeclaration", "MethodDefOrRef")),
    0x1A: (("Name", "s"),),
    0x1B: (("Signature", "b"),),
    0x1C: (("MappingFlags", "u2"), ("MemberForwarded", "MemberForwarded"), ("ImportName", "s"),
           ("ImportScope", 0x1A)),
    0x1D: (("RVA", "u4"), ("Field", 0x04)),
    0x1E: (("Token", "u4"), ("FuncCode", "u4")),
    0x1F: (("Token", "u4"),),
    0x20: (("HashAlgId", "u4"), ("Major", "u2"), ("Minor", "u2"), ("Build", "u2"), ("Revision", "u2"),
           ("Flags", "u4"), ("PublicKey", "b"), ("Name", "s"), ("Culture", "s")),
    0x21: (("Processor", "u4"),),
    0x22: (("OSPlatformID", "u4"), ("OSMajorVersion", "u4"), ("OSMinorVersion", "u4")),
    0x23: (("Major", "u2"), ("Minor", "u2"), ("Build", "u2"), ("Revision", "u2"), ("Flags", "u4"),
           ("PublicKeyOrToken", "b"), ("Name", "s"), ("Culture", "s"), ("HashValue", "b")),
    0x24: (("Processor", "u4"), ("AssemblyRef", 0x23)),
    0x25: (("OSPlatformId", "u4"), ("OSMajorVersion", "u4"), ("OSMinorVersion", "u4"),
           ("AssemblyRef", 0x23)),
    0x26: (("Flags", "u4"), ("Name", "s"), ("HashValue", "b")),
    0x27: (("Flags", "u4"), ("TypeDefId", "u4"), ("Name", "s"), ("Namespace", "s"),
           ("Implementation", "Implementation")),
    0x28: (("Offset", "u4"), ("Flags", "u4"), ("Name", "s"), ("Implementation", "Implementation")),
    0x29: (("NestedClass", 0x02), ("EnclosingClass", 0x02)),
    0x2A: (("Number", "u2"), ("Flags", "u2"), ("Owner", "TypeOrMethodDef"), ("Name", "s")),
    0x2B: (("Method", "MethodDefOrRef"), ("Instantiation", "b")),
    0x2C: (("Owner", 0x2A), ("Constraint", "TypeDefOrRef")),
}  # fmt: skip


def row_dtype(table: int, counts: list[int], heap_sizes: int) -> np.dtype:
    """The numpy dtype of one row of ``table`` (II.24.2.6: each column 2 or 4 bytes)."""
    sizes = {"s": 4 if heap_sizes & 1 else 2, "g": 4 if heap_sizes & 2 else 2,
             "b": 4 if heap_sizes & 4 else 2}  # fmt: skip
    fields = []
    for name, kind in SCHEMA[table]:
        if isinstance(kind, str) and kind in sizes:
            width = sizes[kind]
        elif isinstance(kind, str) and kind in CODED_INDEXES:
            bits, targets = CODED_INDEXES[kind]
            most = max(counts[x] for x in targets if x >= 0)
            width = 2 if most < 1 << (16 - bits) else 4
        elif kind in ("u2", "u4"):
            width = 2 if kind == "u2" else 4
        else:
            width = 2 if counts[kind] < 1 << 16 else 4
        fields.append((name, "<u2" if width == 2 else "<u4"))
    return np.dtype(fields)
