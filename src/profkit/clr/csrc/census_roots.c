/* libprofkit_clr: naming the census's roots: static fields and the methods of stack roots.
 *
 * A static field's object is found the way the Profiling API allows: every loaded
 * module's type definitions and their static fields from metadata (those of a reference
 * type, not constants), the class from its token (a generic definition or a class not
 * loaded has none: skipped), its address from GetAppDomainStaticAddress (a class not yet
 * initialised has none), and the object stored there; a thread-static field's the
 * same, once for each managed thread still alive (EnumThreads, GetThreadStaticAddress2).
 * A stack root's id is the FunctionID of the frame holding it: its method's name. Why a
 * unit of its own: finding roots' names walks metadata, apart from the GC's callbacks.
 */
#include "census.h"

#include <string.h>

#define MAX_STATIC_FIELDS 1000000u /* fields looked at, over all modules */
#define FIELD_STATIC 0x10u
#define FIELD_LITERAL 0x40u
#define STATIC_APP_DOMAIN 1
#define STATIC_THREAD 2
#define MAX_THREADS 256

typedef void *HCORENUM;
typedef void (*fn_CloseEnum)(void *, HCORENUM);
typedef HRESULT (*fn_EnumTypeDefs)(void *, HCORENUM *, mdToken *, ULONG, ULONG *);
typedef HRESULT (*fn_EnumFields)(void *, HCORENUM *, mdToken, mdToken *, ULONG, ULONG *);
typedef HRESULT (*fn_GetFieldProps)(void *, mdToken, mdToken *, WCHAR *, ULONG, ULONG *, DWORD *, const uint8_t **,
                                    ULONG *, DWORD *, const void **, ULONG *);
typedef HRESULT (*fn_GetClassFromToken)(void *, ModuleID, mdToken, ClassID *);
typedef HRESULT (*fn_GetStaticFieldInfo)(void *, ClassID, mdToken, int *);
typedef HRESULT (*fn_GetAppDomainsContainingModule)(void *, ModuleID, uint32_t, uint32_t *, UINT_PTR *);
typedef HRESULT (*fn_GetAppDomainStaticAddress)(void *, ClassID, mdToken, UINT_PTR, void **);
typedef HRESULT (*fn_GetThreadStaticAddress2)(void *, ClassID, mdToken, UINT_PTR, ThreadID, void **);
typedef HRESULT (*fn_EnumThreads)(void *, void **);
typedef HRESULT (*fn_ThreadEnumNext)(void *, ULONG, ThreadID *, ULONG *);

static UINT_PTR g_methods[CENSUS_MAX_METHODS];
static size_t g_n_methods;
static size_t g_fields_seen;
static ThreadID g_threads_alive[MAX_THREADS];
static ULONG g_n_threads_alive;

/* The managed threads still alive, for thread-static fields (ICorProfilerInfo4+). */
static void list_threads(void) {
    void *e = NULL;
    g_n_threads_alive = 0;
    if (g_info_version < 4 || ((fn_EnumThreads)SLOT(g_info, PI_EnumThreads))(g_info, &e) < 0 || !e) return;
    if (((fn_ThreadEnumNext)SLOT(e, ENUM_Next))(e, MAX_THREADS, g_threads_alive, &g_n_threads_alive) < 0)
        g_n_threads_alive = 0;
    ((fn_Release)UNK_SLOT(e, UNK_Release))(e);
}

/* Called under the census lock, inside the GC: remember, name later. */
HIDDEN void note_stack_root(UINT_PTR fid) {
    for (size_t i = 0; i < g_n_methods; i++)
        if (g_methods[i] == fid) return;
    if (g_n_methods < CENSUS_MAX_METHODS) g_methods[g_n_methods++] = fid;
}

HIDDEN void write_method_names(void) {
    char name[NAME_BYTES];
    for (size_t i = 0; i < g_n_methods; i++) {
        function_name(g_methods[i], name, sizeof name);
        fprintf(g_census, "m\t%lx\t%s\n", (unsigned long)g_methods[i], name);
    }
}

/* A field signature (ECMA-335 II.23.2.4) of a reference type: what a static root can be. */
static int holds_reference(const uint8_t *sig, ULONG n) {
    if (!sig || n < 2 || (sig[0] & 0x0f) != 0x06) return 0;
    size_t i = 1;
    while (i < n && (sig[i] == 0x1f || sig[i] == 0x20)) i += 2; /* custom modifiers (1-byte tokens) */
    if (i >= n) return 0;
    uint8_t t = sig[i];
    if (t == 0x15) return i + 1 < n && sig[i + 1] == 0x12; /* GENERICINST CLASS */
    return t == 0x0e || t == 0x12 || t == 0x14 || t == 0x1c || t == 0x1d;
}

static void emit(ObjectID obj, const char *type, const char *field) {
    if (obj) fprintf(g_census, "s\t%lx\t%s.%s\n", (unsigned long)obj, type, field);
}

/* The objects a static field of `cls` holds now: "s" records. */
static void static_values(ModuleID mod, ClassID cls, mdToken fd, const char *type, const char *field) {
    int kind = 0;
    uint32_t n = 0;
    UINT_PTR domain = 0;
    void *addr = NULL;
    if (((fn_GetStaticFieldInfo)SLOT(g_info, PI_GetStaticFieldInfo))(g_info, cls, fd, &kind) < 0) return;
    fn_GetAppDomainsContainingModule domains =
        (fn_GetAppDomainsContainingModule)SLOT(g_info, PI_GetAppDomainsContainingModule);
    if (domains(g_info, mod, 1, &n, &domain) < 0 || n == 0) return;
    if (kind & STATIC_APP_DOMAIN) {
        fn_GetAppDomainStaticAddress get = (fn_GetAppDomainStaticAddress)SLOT(g_info, PI_GetAppDomainStaticAddress);
        if (get(g_info, cls, fd, domain, &addr) >= 0 && addr) emit(*(const ObjectID *)addr, type, field);
    }
    if ((kind & STATIC_THREAD) && g_info_version >= 3) {
        fn_GetThreadStaticAddress2 get = (fn_GetThreadStaticAddress2)SLOT(g_info, PI_GetThreadStaticAddress2);
        for (ULONG i = 0; i < g_n_threads_alive; i++)
            if (get(g_info, cls, fd, domain, g_threads_alive[i], &addr) >= 0 && addr)
                emit(*(const ObjectID *)addr, type, field);
    }
}

/* One static field: an "s" record when it is of a reference type and holds an object. */
static void static_field(void *md, ModuleID mod, mdToken td, mdToken fd, ClassID *cls) {
    WCHAR w[512];
    ULONG len = 0, sig_len = 0, value_len = 0;
    DWORD attr = 0, flag = 0;
    mdToken owner = 0;
    const uint8_t *sig = NULL;
    const void *value = NULL;
    fn_GetFieldProps props = (fn_GetFieldProps)SLOT(md, MD_GetFieldProps);
    if (props(md, fd, &owner, w, 512, &len, &attr, &sig, &sig_len, &flag, &value, &value_len) < 0) return;
    if (!(attr & FIELD_STATIC) || (attr & FIELD_LITERAL) || !holds_reference(sig, sig_len)) return;
    if (!*cls && ((fn_GetClassFromToken)SLOT(g_info, PI_GetClassFromToken))(g_info, mod, td, cls) < 0) return;
    char name[NAME_BYTES], field[1024];
    type_name(md, td, name, sizeof name);
    utf16_to_utf8(w, len < 512 ? len : 512, field, sizeof field);
    static_values(mod, *cls, fd, name, field);
}

static void type_statics(void *md, ModuleID mod, mdToken td) {
    HCORENUM e = NULL;
    mdToken fields[64];
    ULONG n = 0;
    ClassID cls = 0;
    fn_EnumFields enum_fields = (fn_EnumFields)SLOT(md, MD_EnumFields);
    while (g_fields_seen < MAX_STATIC_FIELDS && enum_fields(md, &e, td, fields, 64, &n) == S_OK && n) {
        g_fields_seen += n;
        for (ULONG i = 0; i < n; i++) static_field(md, mod, td, fields[i], &cls);
    }
    if (e) ((fn_CloseEnum)SLOT(md, MD_CloseEnum))(md, e);
}

static void module_statics(ModuleID mod) {
    void *md = module_metadata(mod);
    if (!md) return;
    HCORENUM e = NULL;
    mdToken types[256];
    ULONG n = 0;
    fn_EnumTypeDefs enum_types = (fn_EnumTypeDefs)SLOT(md, MD_EnumTypeDefs);
    while (g_fields_seen < MAX_STATIC_FIELDS && enum_types(md, &e, types, 256, &n) == S_OK && n)
        for (ULONG i = 0; i < n; i++) type_statics(md, mod, types[i]);
    if (e) ((fn_CloseEnum)SLOT(md, MD_CloseEnum))(md, e);
    ((fn_Release)UNK_SLOT(md, UNK_Release))(md);
}

HIDDEN void write_static_roots(void) {
    pthread_mutex_lock(&g_lock);
    size_t n = g_n_modules;
    ModuleID ids[4096];
    if (n > 4096) n = 4096;
    for (size_t i = 0; i < n; i++) ids[i] = g_modules[i].id;
    pthread_mutex_unlock(&g_lock);
    list_threads();
    for (size_t i = 0; i < n; i++) module_statics(ids[i]);
}
