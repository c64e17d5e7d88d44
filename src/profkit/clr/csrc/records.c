/* libprofkit_clr: the rare records: timestamped events, loaded modules, the code map.
 *
 * Why a unit of its own: these are what the callbacks other than Enter/Leave produce;
 * they are rare, so they are simply appended under g_lock (bounded: MAX_RECORDS), and
 * output.c writes them at the end. The code map (JIT and ReadyToRun code addresses ->
 * names) is what profkit's perf map is made from.
 */
#include "profiler.h"

#include <stdlib.h>
#include <string.h>

#define MAX_RECORDS 200000
HIDDEN rec_t *g_recs;
HIDDEN size_t g_n_recs, g_recs_dropped;
static size_t g_cap_recs;

HIDDEN module_t *g_modules;
HIDDEN size_t g_n_modules;
static size_t g_cap_modules;

HIDDEN code_t *g_code;
HIDDEN size_t g_n_code;
static size_t g_cap_code;
/* functions whose code was not yet available when we were told about it */
static struct {
    FunctionID fid;
    char kind;
} *g_pending;
static size_t g_n_pending, g_cap_pending;

HIDDEN int grow(void **arr, size_t *cap, size_t n, size_t size) {
    if (n < *cap) return 0;
    size_t c = *cap ? *cap * 2 : 64;
    void *p = realloc(*arr, c * size);
    if (!p) return -1;
    *arr = p;
    *cap = c;
    return 0;
}

/* caller holds g_lock */
HIDDEN void record_locked(uint32_t tid, const char *kind, const char *text) {
    if (g_n_recs >= MAX_RECORDS || grow((void **)&g_recs, &g_cap_recs, g_n_recs, sizeof *g_recs) < 0) {
        g_recs_dropped++;
        return;
    }
    rec_t *r = &g_recs[g_n_recs++];
    r->t = now_ns() - t0;
    r->tid = tid;
    r->kind = kind;
    r->text = strdup(text ? text : "");
}

HIDDEN void record(const char *kind, const char *text) {
    uint32_t tid = current_tid();
    pthread_mutex_lock(&g_lock);
    record_locked(tid, kind, text);
    pthread_mutex_unlock(&g_lock);
}

typedef HRESULT (*fn_GetCodeInfo2)(void *, FunctionID, uint32_t, uint32_t *, CodeInfo *);
typedef HRESULT (*fn_GetFunctionInfo)(void *, FunctionID, ClassID *, ModuleID *, mdToken *);

/* Code-map entries for fid; -1 if its code is not available yet. */
HIDDEN int add_code(FunctionID fid, char kind) {
    CodeInfo info[8];
    uint32_t n = 0;
    HRESULT hr = ((fn_GetCodeInfo2)SLOT(g_info, PI_GetCodeInfo2))(g_info, fid, 8, &n, info);
    if (hr < 0 || n == 0) return -1;
    ClassID cls = 0;
    ModuleID mod = 0;
    mdToken tok = 0;
    ((fn_GetFunctionInfo)SLOT(g_info, PI_GetFunctionInfo))(g_info, fid, &cls, &mod, &tok);
    char name[NAME_BYTES];
    function_name(fid, name, sizeof name);
    pthread_mutex_lock(&g_lock);
    for (uint32_t i = 0; i < n && i < 8; i++) {
        if (!info[i].size) continue;
        if (grow((void **)&g_code, &g_cap_code, g_n_code, sizeof *g_code) < 0) break;
        code_t *c = &g_code[g_n_code++];
        c->start = info[i].start;
        c->size = info[i].size;
        c->module = mod;
        c->kind = kind;
        c->name = strdup(name);
    }
    pthread_mutex_unlock(&g_lock);
    return 0;
}

HIDDEN void code_later(FunctionID fid, char kind) {
    pthread_mutex_lock(&g_lock);
    if (grow((void **)&g_pending, &g_cap_pending, g_n_pending, sizeof *g_pending) == 0) {
        g_pending[g_n_pending].fid = fid;
        g_pending[g_n_pending++].kind = kind;
    }
    pthread_mutex_unlock(&g_lock);
}

/* Shutdown: code whose address was not known when it was compiled or found. */
HIDDEN void add_pending_code(void) {
    for (size_t i = 0; i < g_n_pending; i++) add_code(g_pending[i].fid, g_pending[i].kind);
}

/* A module loaded: kept for the result file (and recorded, with EV_LOADS). */
HIDDEN void add_module(ModuleID id, UINT_PTR base, DWORD flags, const char *path) {
    uint32_t tid = current_tid();
    pthread_mutex_lock(&g_lock);
    if (grow((void **)&g_modules, &g_cap_modules, g_n_modules, sizeof *g_modules) == 0) {
        module_t *m = &g_modules[g_n_modules++];
        m->id = id;
        m->base = base;
        m->flags = flags;
        m->path = strdup(path);
    }
    if (S.events & EV_LOADS) record_locked(tid, "module", path);
    pthread_mutex_unlock(&g_lock);
}
