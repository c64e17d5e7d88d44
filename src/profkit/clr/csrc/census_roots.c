/* libprofkit_clr: naming the census's roots: static fields and the methods of stack roots.
 *
 * A static field's object is found the way the Profiling API allows: every class the
 * runtime loaded (ClassLoadFinished; at most CENSUS_MAX_LOADED kept, generic
 * instantiations each their own), its static fields from metadata (those of a reference
 * type, not constants), each one's address from GetAppDomainStaticAddress (a class not
 * yet initialised has none), and the object stored there; a thread-static field's the
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
typedef HRESULT (*fn_GetClassIDInfo2)(void *, ClassID, ModuleID *, mdToken *, ClassID *, uint32_t, uint32_t *,
                                      ClassID *);
typedef HRESULT (*fn_EnumFields)(void *, HCORENUM *, mdToken, mdToken *, ULONG, ULONG *);
typedef HRESULT (*fn_GetFieldProps)(void *, mdToken, mdToken *, WCHAR *, ULONG, ULONG *, DWORD *, const uint8_t **,
                                    ULONG *, DWORD *, const void **, ULONG *);
typedef HRESULT (*fn_GetStaticFieldInfo)(void *, ClassID, mdToken, int *);
typedef HRESULT (*fn_GetAppDomainsContainingModule)(void *, ModuleID, uint32_t, uint32_t *, UINT_PTR *);
typedef HRESULT (*fn_GetAppDomainStaticAddress)(void *, ClassID, mdToken, UINT_PTR, void **);
typedef HRESULT (*fn_GetThreadStaticAddress2)(void *, ClassID, mdToken, UINT_PTR, ThreadID, void **);
typedef HRESULT (*fn_EnumThreads)(void *, void **);
typedef HRESULT (*fn_GetCurrentThreadID)(void *, ThreadID *);
typedef HRESULT (*fn_GetThreadAppDomain)(void *, ThreadID, UINT_PTR *);
typedef HRESULT (*fn_ThreadEnumNext)(void *, ULONG, ThreadID *, ULONG *);

static ClassID *g_loaded;
static size_t g_n_loaded, g_cap_loaded;
/* The AppDomain of the classes loaded (CoreCLR has one), learnt at a class load: inside a
 * GC, where the statics are read, GetAppDomainsContainingModule is refused. */
static UINT_PTR g_domain;
static pthread_mutex_t g_loaded_lock = PTHREAD_MUTEX_INITIALIZER;
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
    pthread_mutex_lock(&g_loaded_lock);
    domain = g_domain, n = g_domain != 0;
    pthread_mutex_unlock(&g_loaded_lock);
    if (!n && (domains(g_info, mod, 1, &n, &domain) < 0 || n == 0)) return;
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
static void static_field(void *md, ModuleID mod, ClassID cls, mdToken fd, const char *type) {
    WCHAR w[512];
    ULONG len = 0, sig_len = 0, value_len = 0;
    DWORD attr = 0, flag = 0;
    mdToken owner = 0;
    const uint8_t *sig = NULL;
    const void *value = NULL;
    fn_GetFieldProps props = (fn_GetFieldProps)SLOT(md, MD_GetFieldProps);
    if (props(md, fd, &owner, w, 512, &len, &attr, &sig, &sig_len, &flag, &value, &value_len) < 0) return;
    if (!(attr & FIELD_STATIC) || (attr & FIELD_LITERAL) || !holds_reference(sig, sig_len)) return;
    char field[1024];
    utf16_to_utf8(w, len < 512 ? len : 512, field, sizeof field);
    static_values(mod, cls, fd, type, field);
}

/* The static fields of one loaded class (a generic instantiation has its own). */
static void class_statics(ClassID cls) {
    ModuleID mod = 0;
    mdToken td = 0;
    ClassID parent = 0;
    uint32_t n_args = 0;
    fn_GetClassIDInfo2 info = (fn_GetClassIDInfo2)SLOT(g_info, PI_GetClassIDInfo2);
    if (info(g_info, cls, &mod, &td, &parent, 0, &n_args, NULL) < 0 || !td) return;
    void *md = module_metadata(mod);
    if (!md) return;
    HCORENUM e = NULL;
    mdToken fields[64];
    ULONG n = 0;
    char type[NAME_BYTES] = "";
    fn_EnumFields enum_fields = (fn_EnumFields)SLOT(md, MD_EnumFields);
    while (g_fields_seen < MAX_STATIC_FIELDS && enum_fields(md, &e, td, fields, 64, &n) == S_OK && n) {
        g_fields_seen += n;
        if (!type[0]) class_display_name(cls, type, sizeof type);
        for (ULONG i = 0; i < n; i++) static_field(md, mod, cls, fields[i], type);
    }
    if (e) ((fn_CloseEnum)SLOT(md, MD_CloseEnum))(md, e);
    ((fn_Release)UNK_SLOT(md, UNK_Release))(md);
}

/* Every class the runtime loaded (ClassLoadFinished): only those have statics to read,
 * and asking for a class by its token would load it (and, on a thread the runtime does
 * not know, as at a SIGTERM's shutdown, crash). */
HIDDEN HRESULT cb_ClassLoadFinished(void *self, ClassID cls, HRESULT status) {
    (void)self;
    if (status < 0 || !g_census) return S_OK;
    ThreadID thread = 0;
    UINT_PTR domain = 0;
    if (!g_domain && ((fn_GetCurrentThreadID)SLOT(g_info, PI_GetCurrentThreadID))(g_info, &thread) >= 0)
        if (((fn_GetThreadAppDomain)SLOT(g_info, PI_GetThreadAppDomain))(g_info, thread, &domain) < 0) domain = 0;
    pthread_mutex_lock(&g_loaded_lock);
    if (!g_domain) g_domain = domain;
    if (g_n_loaded < CENSUS_MAX_LOADED && grow((void **)&g_loaded, &g_cap_loaded, g_n_loaded, sizeof *g_loaded) == 0)
        g_loaded[g_n_loaded++] = cls;
    pthread_mutex_unlock(&g_loaded_lock);
    return S_OK;
}

HIDDEN void write_static_roots(void) {
    list_threads();
    pthread_mutex_lock(&g_loaded_lock);
    size_t n = g_n_loaded;
    pthread_mutex_unlock(&g_loaded_lock);
    for (size_t i = 0; i < n; i++) class_statics(g_loaded[i]);
}
