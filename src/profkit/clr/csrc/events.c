/* libprofkit_clr: the rare callbacks: assembly and module loads, JIT and ReadyToRun
 * code, inlining, exceptions thrown and caught, garbage collections.
 *
 * Each turns what the runtime reports into a record or a code-map entry (records.c),
 * honouring PROFKIT_CLR_EVENTS. Why a unit of its own: these run rarely and may call into
 * the runtime (metadata, code info); nothing here is on the hot path. Threads have
 * threads.c, unwinding hooks.c.
 */
#include "profiler.h"
#include "census.h"
#include "alloc.h"

#include <string.h>

typedef HRESULT (*fn_GetAssemblyInfo)(void *, AssemblyID, ULONG, ULONG *, WCHAR *, UINT_PTR *, ModuleID *);
typedef HRESULT (*fn_GetModuleInfo2)(void *, ModuleID, UINT_PTR *, ULONG, ULONG *, WCHAR *, AssemblyID *, DWORD *);
typedef HRESULT (*fn_GetClassFromObject)(void *, ObjectID, ClassID *);
typedef HRESULT (*fn_GetClassIDInfo)(void *, ClassID, ModuleID *, mdToken *);
typedef HRESULT (*fn_GetModuleMetaData)(void *, ModuleID, DWORD, const GUID *, void **);

HIDDEN HRESULT cb_AssemblyLoadFinished(void *self, AssemblyID id, HRESULT status) {
    (void)self;
    if (status < 0) return S_OK;
    WCHAR w[512];
    ULONG len = 0;
    UINT_PTR domain = 0;
    ModuleID mod = 0;
    if (((fn_GetAssemblyInfo)SLOT(g_info, PI_GetAssemblyInfo))(g_info, id, 512, &len, w, &domain, &mod) >= 0) {
        char name[1024];
        utf16_to_utf8(w, len < 512 ? len : 512, name, sizeof name);
        record("assembly", name);
    }
    return S_OK;
}

HIDDEN HRESULT cb_ModuleLoadFinished(void *self, ModuleID id, HRESULT status) {
    (void)self;
    if (status < 0) return S_OK;
    WCHAR w[1024];
    ULONG len = 0;
    UINT_PTR base = 0;
    AssemblyID asm_id = 0;
    DWORD flags = 0;
    if (((fn_GetModuleInfo2)SLOT(g_info, PI_GetModuleInfo2))(g_info, id, &base, 1024, &len, w, &asm_id, &flags) < 0)
        return S_OK;
    char path[2048];
    utf16_to_utf8(w, len < 1024 ? len : 1024, path, sizeof path);
    add_module(id, base, flags, path);
    return S_OK;
}

HIDDEN HRESULT cb_JITCompilationFinished(void *self, FunctionID fid, HRESULT status, BOOL safe) {
    (void)self, (void)safe;
    if (status >= 0 && (S.events & EV_JIT) && add_code(fid, 'j') < 0) code_later(fid, 'j');
    return S_OK;
}

HIDDEN HRESULT cb_JITCachedFunctionSearchStarted(void *self, FunctionID fid, BOOL *use) {
    (void)self, (void)fid;
    *use = 1; /* keep the precompiled code: profkit observes, never changes code */
    return S_OK;
}

HIDDEN HRESULT cb_JITCachedFunctionSearchFinished(void *self, FunctionID fid, int result) {
    (void)self;
    if (result == 0 /* COR_PRF_CACHED_FUNCTION_FOUND */ && (S.events & EV_JIT) && add_code(fid, 'r') < 0)
        code_later(fid, 'r');
    return S_OK;
}

HIDDEN HRESULT cb_JITInlining(void *self, FunctionID caller, FunctionID callee, BOOL *inline_ok) {
    (void)self, (void)caller;
    /* An inlined call has no Enter/Leave: keep hooked functions out of line, so their
     * call counts are exact; everything else inlines as usual. */
    *inline_ok = (S.events & EV_CALLS) ? map_function(callee) == UINT32_MAX : 1;
    return S_OK;
}

HIDDEN HRESULT cb_ExceptionThrown(void *self, ObjectID obj) {
    (void)self;
    char name[NAME_BYTES] = "(unknown exception type)";
    ClassID cls = 0;
    ModuleID mod = 0;
    mdToken td = 0;
    void *md = NULL;
    if (((fn_GetClassFromObject)SLOT(g_info, PI_GetClassFromObject))(g_info, obj, &cls) >= 0 &&
        ((fn_GetClassIDInfo)SLOT(g_info, PI_GetClassIDInfo))(g_info, cls, &mod, &td) >= 0 &&
        ((fn_GetModuleMetaData)SLOT(g_info, PI_GetModuleMetaData))(g_info, mod, 0, &IID_IMetaDataImport, &md) >= 0 &&
        md) {
        type_name(md, td, name, sizeof name);
        ((fn_Release)UNK_SLOT(md, UNK_Release))(md);
    }
    if (S.events & EV_EXCEPTIONS) record("exception", name);
    return S_OK;
}

HIDDEN HRESULT cb_ExceptionCatcherEnter(void *self, FunctionID fid, ObjectID obj) {
    (void)self, (void)obj;
    unwind_caught(fid); /* first: the call bookkeeping needs it whatever is recorded */
    if (!(S.events & EV_EXCEPTIONS)) return S_OK;
    char name[NAME_BYTES];
    function_name(fid, name, sizeof name);
    record("catch", name);
    return S_OK;
}

HIDDEN HRESULT cb_GarbageCollectionStarted(void *self, int n, BOOL *gens, int reason) {
    (void)self;
    census_gc_started(n > 2 && gens[2]);
    int gen = -1;
    for (int i = 0; i < n && i < 3; i++)
        if (gens[i]) gen = i;
    char text[64];
    snprintf(text, sizeof text, "%d %s%s%s", gen, reason == 1 ? "induced" : "other",
             n > 3 && gens[3] ? " loh" : "", n > 4 && gens[4] ? " poh" : "");
    record("gc-start", text);
    if (g_alloc_on) alloc_gc_started(n, gens);
    return S_OK;
}

HIDDEN HRESULT cb_GarbageCollectionFinished(void *self) {
    (void)self;
    census_gc_finished();
    if (g_alloc_on) alloc_gc_finished();
    record("gc-end", "");
    return S_OK;
}

HIDDEN HRESULT cb_LoadAsNotificationOnly(void *self, BOOL *only) {
    (void)self;
    *only = 0;
    return S_OK;
}
