/* libprofkit_clr: which functions are hooked, and the method table (client id -> name).
 *
 * Owns the FunctionIDMapper2: the runtime asks once per function; a function in the
 * namespace filter gets a small client id (its Enter/Leave events carry it), any other is
 * declined and costs nothing. The names are kept in chunks the writer reads without a
 * lock; the FunctionID map is under g_lock, never held across a call into the runtime.
 */
#include "profiler.h"

#include <stdlib.h>
#include <string.h>

#define CHUNK 4096
#define MAX_CHUNKS 4096 /* 16 M methods */
static _Atomic(char **) g_names[MAX_CHUNKS];
static uint32_t g_n_methods = 1; /* id 0: "(events lost)" */
/* FunctionID -> id (hooked) or UINT32_MAX (declined): open addressing, under g_lock */
static struct fent {
    FunctionID fid;
    uint32_t id;
} *g_fmap;
static size_t g_fmap_cap, g_fmap_n;

HIDDEN const char *method_name(uint32_t id) {
    if (id == 0) return "(events lost)";
    char **chunk = atomic_load_explicit(&g_names[id / CHUNK], memory_order_acquire);
    return chunk ? chunk[id % CHUNK] : "(unknown)";
}

static struct fent *fmap_slot(FunctionID fid) {
    size_t mask = g_fmap_cap - 1, i = (fid >> 3) * 0x9E3779B97F4A7C15ull & mask;
    while (g_fmap[i].fid && g_fmap[i].fid != fid) i = (i + 1) & mask;
    return &g_fmap[i];
}

static int fmap_grow(void) {
    size_t cap = g_fmap_cap ? g_fmap_cap * 2 : 4096;
    struct fent *old = g_fmap;
    size_t old_cap = g_fmap_cap;
    g_fmap = calloc(cap, sizeof *g_fmap);
    if (!g_fmap) {
        g_fmap = old;
        return -1;
    }
    g_fmap_cap = cap;
    for (size_t i = 0; i < old_cap; i++)
        if (old[i].fid) *fmap_slot(old[i].fid) = old[i];
    free(old);
    return 0;
}

static uint32_t fmap_find(FunctionID fid, int *found) { /* caller holds g_lock */
    *found = 0;
    if (!g_fmap_cap) return UINT32_MAX;
    struct fent *e = fmap_slot(fid);
    *found = e->fid == fid;
    return *found ? e->id : UINT32_MAX;
}

/* Decide (once) whether fid is hooked; returns its client id, or UINT32_MAX if not.
 * The name is read from metadata *outside* g_lock: the runtime may hold its own locks
 * while calling us, and our lock must never be held across a call into the runtime. Two
 * threads deciding the same function at once both read its name; the first to insert wins. */
HIDDEN uint32_t map_function(FunctionID fid) {
    int found;
    pthread_mutex_lock(&g_lock);
    uint32_t id = fmap_find(fid, &found);
    pthread_mutex_unlock(&g_lock);
    if (found) return id;
    char name[NAME_BYTES];
    function_name(fid, name, sizeof name);
    int wanted = (S.events & EV_CALLS) && prefix_match(name);
    char *copy = wanted ? strdup(name) : NULL;
    pthread_mutex_lock(&g_lock);
    id = fmap_find(fid, &found);
    if (found) {
        pthread_mutex_unlock(&g_lock);
        free(copy);
        return id;
    }
    if (copy && g_n_methods < CHUNK * MAX_CHUNKS) {
        char **chunk = atomic_load_explicit(&g_names[g_n_methods / CHUNK], memory_order_relaxed);
        if (!chunk) {
            chunk = calloc(CHUNK, sizeof(char *));
            if (chunk) atomic_store_explicit(&g_names[g_n_methods / CHUNK], chunk, memory_order_release);
        }
        if (chunk) {
            id = g_n_methods++;
            chunk[id % CHUNK] = copy;
            copy = NULL;
        }
    }
    free(copy);
    if ((g_fmap_n + 1) * 2 > g_fmap_cap && fmap_grow() < 0) {
        pthread_mutex_unlock(&g_lock); /* not remembered: decided again next time */
        return id;
    }
    struct fent *e = fmap_slot(fid);
    e->fid = fid;
    e->id = id;
    g_fmap_n++;
    pthread_mutex_unlock(&g_lock);
    return id;
}

HIDDEN UINT_PTR mapper(FunctionID fid, void *client_data, BOOL *hook) {
    (void)client_data;
    uint32_t id = map_function(fid);
    *hook = id != UINT32_MAX;
    return *hook ? (UINT_PTR)id : fid; /* never 0 when hooked: ids start at 1 */
}

/* The client id of fid if it was decided and hooked, else UINT32_MAX (never decides: an
 * unwinding frame was entered, so its function was mapped already if it is hooked). */
HIDDEN uint32_t method_id(FunctionID fid) {
    uint32_t id = UINT32_MAX;
    pthread_mutex_lock(&g_lock);
    if (g_fmap_cap) {
        struct fent *e = fmap_slot(fid);
        if (e->fid == fid) id = e->id;
    }
    pthread_mutex_unlock(&g_lock);
    return id;
}

/* Ids 1 .. method_count() - 1 are methods (the result file lists them); caller holds g_lock. */
HIDDEN uint32_t method_count(void) { return g_n_methods; }
