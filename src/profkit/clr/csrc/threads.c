/* libprofkit_clr: managed threads: which OS thread each is, and their names.
 *
 * Why a unit of its own: the runtime speaks of ThreadIDs, the hot path and the result
 * file of OS thread ids; the callbacks that connect the two (created, assigned, destroyed,
 * named) and the name lookup at the end share one small table, under g_lock.
 */
#include "profiler.h"

#include <stdlib.h>
#include <string.h>

HIDDEN tname_t *g_tnames;
HIDDEN size_t g_n_tnames;
static size_t g_cap_tnames;
static ThreadID g_managed[4096];
static uint32_t g_managed_tid[4096];
static size_t g_n_managed;

typedef HRESULT (*fn_GetThreadInfo)(void *, ThreadID, DWORD *);

static uint32_t os_tid_of(ThreadID managed) {
    DWORD tid = 0;
    if (((fn_GetThreadInfo)SLOT(g_info, PI_GetThreadInfo))(g_info, managed, &tid) >= 0 && tid) return tid;
    for (size_t i = 0; i < g_n_managed; i++)
        if (g_managed[i] == managed) return g_managed_tid[i];
    return 0;
}

static void remember_managed(ThreadID managed, uint32_t tid) {
    pthread_mutex_lock(&g_lock);
    size_t i;
    for (i = 0; i < g_n_managed; i++)
        if (g_managed[i] == managed) break;
    if (i < sizeof g_managed / sizeof g_managed[0]) {
        g_managed[i] = managed;
        g_managed_tid[i] = tid;
        if (i == g_n_managed) g_n_managed++;
    }
    pthread_mutex_unlock(&g_lock);
}

HIDDEN HRESULT cb_ThreadCreated(void *self, ThreadID managed) {
    (void)self;
    uint32_t tid = os_tid_of(managed);
    if (tid) remember_managed(managed, tid);
    char text[64];
    snprintf(text, sizeof text, "%u", tid);
    if (S.events & EV_THREADS) record("thread-created", text);
    return S_OK;
}

HIDDEN HRESULT cb_ThreadAssigned(void *self, ThreadID managed, DWORD tid) {
    (void)self;
    remember_managed(managed, tid);
    return S_OK;
}

HIDDEN HRESULT cb_ThreadDestroyed(void *self, ThreadID managed) {
    (void)self;
    uint32_t tid = 0;
    pthread_mutex_lock(&g_lock);
    for (size_t i = 0; i < g_n_managed; i++)
        if (g_managed[i] == managed) tid = g_managed_tid[i];
    pthread_mutex_unlock(&g_lock);
    char text[64];
    snprintf(text, sizeof text, "%u", tid);
    if (S.events & EV_THREADS) record("thread-destroyed", text);
    return S_OK;
}

HIDDEN HRESULT cb_ThreadNameChanged(void *self, ThreadID managed, ULONG cch, WCHAR *wname) {
    (void)self;
    uint32_t tid = os_tid_of(managed);
    char name[512];
    utf16_to_utf8(wname, wname ? cch : 0, name, sizeof name);
    pthread_mutex_lock(&g_lock);
    if (grow((void **)&g_tnames, &g_cap_tnames, g_n_tnames, sizeof *g_tnames) == 0) {
        g_tnames[g_n_tnames].managed = managed;
        g_tnames[g_n_tnames].tid = tid;
        g_tnames[g_n_tnames++].name = strdup(name);
    }
    if (S.events & EV_THREADS) {
        char text[600];
        snprintf(text, sizeof text, "%u %s", tid, name);
        record_locked(current_tid(), "thread-named", text);
    }
    pthread_mutex_unlock(&g_lock);
    return S_OK;
}

/* caller holds g_lock */
HIDDEN void resolve_thread_names(void) {
    for (size_t i = 0; i < g_n_tnames; i++)
        for (size_t j = 0; !g_tnames[i].tid && j < g_n_managed; j++)
            if (g_managed[j] == g_tnames[i].managed) g_tnames[i].tid = g_managed_tid[j];
}

HIDDEN const char *thread_name(uint32_t tid) {
    for (size_t i = g_n_tnames; i-- > 0;)
        if (g_tnames[i].tid == tid) return g_tnames[i].name;
    return "";
}
