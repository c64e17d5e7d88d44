/* libprofkit_clr: the census's names: types as C# writes them, and reference fields.
 *
 * A type: "Namespace.Outer+Inner" from metadata; an array its element's name and "[]"
 * ("[,]" for rank 2), so byte[] is "System.Byte[]"; a generic instantiation its
 * arguments in angle brackets ("System.Collections.Generic.List<System.Byte[]>"). A
 * field: the class's own and its parents' fields from GetClassLayout, named by metadata,
 * keyed by their offset in the object (census.c finds each reference's offset). Why a
 * unit of its own: names come from metadata and the type system, after the GC; nothing
 * here runs inside it.
 */
#include "census.h"

#include <stdlib.h>
#include <string.h>

#define MAX_TYPE_ARGS 8
#define MAX_NAME_DEPTH 8 /* List<List<...>> deeper than this is cut */

typedef HRESULT (*fn_IsArrayClass)(void *, ClassID, int *, ClassID *, ULONG *);
typedef HRESULT (*fn_GetClassIDInfo2)(void *, ClassID, ModuleID *, mdToken *, ClassID *, uint32_t, uint32_t *,
                                      ClassID *);
typedef HRESULT (*fn_GetModuleMetaData)(void *, ModuleID, DWORD, const GUID *, void **);
typedef HRESULT (*fn_GetClassLayout)(void *, ClassID, void *, ULONG, ULONG *, ULONG *);
typedef HRESULT (*fn_GetFieldProps)(void *, mdToken, mdToken *, WCHAR *, ULONG, ULONG *, DWORD *, const uint8_t **,
                                    ULONG *, DWORD *, const void **, ULONG *);

typedef struct {
    mdToken field;
    ULONG offset;
} field_offset_t; /* COR_FIELD_OFFSET */

HIDDEN void *module_metadata(ModuleID mod) {
    void *md = NULL;
    fn_GetModuleMetaData get = (fn_GetModuleMetaData)SLOT(g_info, PI_GetModuleMetaData);
    if (get(g_info, mod, 0, &IID_IMetaDataImport, &md) < 0) return NULL;
    return md;
}

/* ECMA-335 element types of arrays whose element has no ClassID to name it by. */
static const char *primitive_name(int elem) {
    static const char *const names[] = {
        [0x02] = "System.Boolean", [0x03] = "System.Char",   [0x04] = "System.SByte",  [0x05] = "System.Byte",
        [0x06] = "System.Int16",   [0x07] = "System.UInt16", [0x08] = "System.Int32",  [0x09] = "System.UInt32",
        [0x0a] = "System.Int64",   [0x0b] = "System.UInt64", [0x0c] = "System.Single", [0x0d] = "System.Double",
        [0x0e] = "System.String",  [0x18] = "System.IntPtr", [0x19] = "System.UIntPtr", [0x1c] = "System.Object",
    };
    if (elem >= 0 && elem < (int)(sizeof names / sizeof names[0]) && names[elem]) return names[elem];
    return "(unknown element)";
}

static size_t put(char *out, size_t o, size_t cap, const char *text) {
    size_t n = strlen(text);
    if (o + n + 1 > cap) n = o + 1 < cap ? cap - o - 1 : 0;
    memcpy(out + o, text, n);
    out[o + n] = 0;
    return o + n;
}

static size_t name_into(ClassID cls, char *out, size_t o, size_t cap, int depth);

static size_t array_name(int elem, ClassID elem_cls, ULONG rank, char *out, size_t o, size_t cap, int depth) {
    if (elem_cls) o = name_into(elem_cls, out, o, cap, depth + 1);
    else o = put(out, o, cap, primitive_name(elem));
    o = put(out, o, cap, "[");
    for (ULONG i = 1; i < rank && i < 32; i++) o = put(out, o, cap, ",");
    return put(out, o, cap, "]");
}

/* "Outer`2+Inner" -> "Outer+Inner": the arguments are written out instead of arities. */
static size_t drop_arity(char *out, size_t start, size_t o) {
    size_t w = start;
    for (size_t r = start; r < o; r++) {
        if (out[r] == '`' && r + 1 < o && out[r + 1] >= '0' && out[r + 1] <= '9') {
            while (r + 1 < o && out[r + 1] >= '0' && out[r + 1] <= '9') r++;
            continue;
        }
        out[w++] = out[r];
    }
    out[w] = 0;
    return w;
}

static size_t generic_args(const ClassID *args, uint32_t n, char *out, size_t o, size_t cap, int depth) {
    o = put(out, o, cap, "<");
    for (uint32_t i = 0; i < n && i < MAX_TYPE_ARGS; i++) {
        if (i) o = put(out, o, cap, ",");
        o = name_into(args[i], out, o, cap, depth + 1);
    }
    return put(out, o, cap, ">");
}

static size_t name_into(ClassID cls, char *out, size_t o, size_t cap, int depth) {
    int elem = 0;
    ClassID elem_cls = 0, parent = 0, args[MAX_TYPE_ARGS];
    ULONG rank = 0;
    ModuleID mod = 0;
    mdToken td = 0;
    uint32_t n_args = 0;
    if (depth > MAX_NAME_DEPTH) return put(out, o, cap, "...");
    if (((fn_IsArrayClass)SLOT(g_info, PI_IsArrayClass))(g_info, cls, &elem, &elem_cls, &rank) == S_OK)
        return array_name(elem, elem_cls, rank, out, o, cap, depth);
    fn_GetClassIDInfo2 info = (fn_GetClassIDInfo2)SLOT(g_info, PI_GetClassIDInfo2);
    void *md = NULL;
    if (info(g_info, cls, &mod, &td, &parent, MAX_TYPE_ARGS, &n_args, args) < 0 || !(md = module_metadata(mod)))
        return put(out, o, cap, "(unknown type)");
    char name[NAME_BYTES];
    type_name(md, td, name, sizeof name);
    ((fn_Release)UNK_SLOT(md, UNK_Release))(md);
    size_t start = o;
    o = put(out, o, cap, name);
    if (n_args == 0) return o;
    o = drop_arity(out, start, o);
    return generic_args(args, n_args, out, o, cap, depth);
}

HIDDEN void class_display_name(ClassID cls, char *out, size_t cap) {
    out[0] = 0;
    name_into(cls, out, 0, cap, 0);
}

/* The reference-holding fields `cls` itself declares, as "f" records of `census_cls`. */
static void own_field_names(ClassID census_cls, ClassID cls, ModuleID mod) {
    ULONG n = 0, size = 0;
    fn_GetClassLayout layout = (fn_GetClassLayout)SLOT(g_info, PI_GetClassLayout);
    if (layout(g_info, cls, NULL, 0, &n, &size) < 0 || n == 0 || n > 65536) return;
    field_offset_t *fields = calloc(n, sizeof *fields);
    void *md = module_metadata(mod);
    if (fields && md && layout(g_info, cls, fields, n, &n, &size) >= 0) {
        fn_GetFieldProps props = (fn_GetFieldProps)SLOT(md, MD_GetFieldProps);
        for (ULONG i = 0; i < n; i++) {
            WCHAR w[512];
            ULONG len = 0, sig_len = 0, value_len = 0;
            DWORD attr = 0, flag = 0;
            mdToken owner = 0;
            const uint8_t *sig = NULL;
            const void *value = NULL;
            if (props(md, fields[i].field, &owner, w, 512, &len, &attr, &sig, &sig_len, &flag, &value, &value_len) < 0)
                continue;
            char name[1024];
            utf16_to_utf8(w, len < 512 ? len : 512, name, sizeof name);
            fprintf(g_census, "f\t%lx\t%x\t%s\n", (unsigned long)census_cls, (unsigned)fields[i].offset, name);
        }
    }
    free(fields);
    if (md) ((fn_Release)UNK_SLOT(md, UNK_Release))(md);
}

/* "f" records for a class whose objects held references: its fields and its parents'. */
HIDDEN void write_field_names(census_class_t *c) {
    int elem = 0;
    ClassID elem_cls = 0;
    ULONG rank = 0;
    if (!c->has_refs || ((fn_IsArrayClass)SLOT(g_info, PI_IsArrayClass))(g_info, c->id, &elem, &elem_cls, &rank) == S_OK)
        return;
    fn_GetClassIDInfo2 info = (fn_GetClassIDInfo2)SLOT(g_info, PI_GetClassIDInfo2);
    ClassID cls = c->id;
    for (int depth = 0; cls && depth < 32; depth++) {
        ModuleID mod = 0;
        mdToken td = 0;
        ClassID parent = 0;
        uint32_t n_args = 0;
        if (info(g_info, cls, &mod, &td, &parent, 0, &n_args, NULL) < 0) return;
        own_field_names(c->id, cls, mod);
        cls = parent;
    }
}
