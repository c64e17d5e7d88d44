/* libprofkit_clr: the allocation samples' sites, names and threads.
 *
 * A site is (thread, stack, type): its samples, the bytes they stand for, how many of
 * those are alive now and were alive at the peak. Types and frames are named once, on
 * first sight, from the ClassID (census_names.c's class_display_name: System.Byte[],
 * generic instantiations) and the FunctionID (metadata.c). Why a unit of its own: these
 * are containers with bounds (alloc.h), apart from sampling and from following objects.
 * Sites and threads are used under g_alloc_lock; the names under their own lock, since
 * naming calls into the runtime and the GC's callbacks must never wait for it.
 */
#include "alloc.h"
#include "census.h"

#include <stdlib.h>
#include <string.h>

/* ---- an open-addressing map: a nonzero key -> an index --------------------------------- */
typedef struct {
    uintptr_t *keys;
    uint32_t *values;
    size_t cap, used;
} idmap_t;

static size_t slot_of(const idmap_t *m, uintptr_t key) {
    size_t i = (size_t)((key >> 3) * 0x9E3779B97F4A7C15ull) & (m->cap - 1);
    while (m->keys[i] && m->keys[i] != key) i = (i + 1) & (m->cap - 1);
    return i;
}

static uint32_t idmap_get(const idmap_t *m, uintptr_t key) {
    if (!m->cap) return UINT32_MAX;
    size_t i = slot_of(m, key);
    return m->keys[i] ? m->values[i] : UINT32_MAX;
}

static int idmap_put(idmap_t *m, uintptr_t key, uint32_t value) {
    if ((m->used + 1) * 2 > m->cap) {
        idmap_t n = {calloc(m->cap ? m->cap * 2 : 256, sizeof(uintptr_t)),
                     calloc(m->cap ? m->cap * 2 : 256, sizeof(uint32_t)), m->cap ? m->cap * 2 : 256, m->used};
        if (!n.keys || !n.values) {
            free(n.keys), free(n.values);
            return -1;
        }
        for (size_t i = 0; i < m->cap; i++)
            if (m->keys[i]) {
                size_t j = slot_of(&n, m->keys[i]);
                n.keys[j] = m->keys[i], n.values[j] = m->values[i];
            }
        free(m->keys), free(m->values);
        *m = n;
    }
    size_t i = slot_of(m, key);
    m->keys[i] = key, m->values[i] = value;
    m->used++;
    return 0;
}

/* ---- names ----------------------------------------------------------------------------- */
typedef struct {
    idmap_t map;
    char **names;
    uint32_t n, cap;
} names_t;
static names_t g_types, g_frames;
static pthread_mutex_t g_names_lock = PTHREAD_MUTEX_INITIALIZER;

static void clean(char *s) {
    for (; *s; s++)
        if (*s == '\t' || *s == '\n' || *s == '\r') *s = ' ';
}

/* The index of `key`'s name, naming it on first sight; UINT32_MAX when full. */
static uint32_t name_index(names_t *t, uintptr_t key, int is_type) {
    pthread_mutex_lock(&g_names_lock);
    uint32_t at = idmap_get(&t->map, key);
    if (at == UINT32_MAX && t->n < ALLOC_MAX_NAMES) {
        char name[NAME_BYTES];
        if (is_type) class_display_name((ClassID)key, name, sizeof name);
        else function_name((FunctionID)key, name, sizeof name);
        clean(name);
        size_t cap = t->cap;
        char *copy = strdup(name);
        if (copy && grow((void **)&t->names, &cap, t->n, sizeof *t->names) == 0 && idmap_put(&t->map, key, t->n) == 0) {
            t->cap = (uint32_t)cap;
            t->names[at = t->n++] = copy;
        } else {
            t->cap = (uint32_t)cap;
            free(copy);
        }
    }
    pthread_mutex_unlock(&g_names_lock);
    return at;
}

HIDDEN uint32_t alloc_type_index(ClassID cls) { return cls ? name_index(&g_types, cls, 1) : UINT32_MAX; }
HIDDEN uint32_t alloc_frame_index(FunctionID fid) { return name_index(&g_frames, fid, 0); }

/* ---- sites ----------------------------------------------------------------------------- */
static site_t *g_sites;
static size_t g_n_sites, g_cap_sites;
static uint32_t *g_pool; /* every site's frames */
static size_t g_n_pool, g_cap_pool;
static idmap_t g_site_map; /* hash -> first site of that hash (a chain by probing below) */

static uint64_t site_hash(uint32_t tid, uint32_t type, uint32_t sclass, const uint32_t *frames, uint32_t depth) {
    uint64_t h = (0xcbf29ce484222325ull ^ ((uint64_t)tid << 32 | type)) * 0x100000001b3ull ^ sclass;
    for (uint32_t i = 0; i < depth; i++) h = (h ^ frames[i]) * 0x100000001b3ull;
    return (h ^ depth) | 1; /* never 0: 0 is the map's empty key */
}

static int same(const site_t *s, uint32_t tid, uint32_t type, uint32_t sclass, const uint32_t *frames,
                uint32_t depth) {
    return s->tid == tid && s->type == type && s->sclass == sclass && s->depth == depth &&
           !memcmp(g_pool + s->frames, frames, depth * sizeof *frames);
}

/* The site of (tid, type, size class, frames), made on first sight; NULL when the bounds
 * are reached. The size class is in the key so that each site lies in one stratum. */
HIDDEN site_t *alloc_site(uint32_t tid, uint32_t type, uint32_t sclass, const uint32_t *frames, uint32_t depth) {
    uint64_t h = site_hash(tid, type, sclass, frames, depth);
    for (uint64_t k = h;; k = (k + 2) | 1) { /* equal hashes: the next odd key */
        uint32_t at = idmap_get(&g_site_map, (uintptr_t)k);
        if (at == UINT32_MAX) break;
        if (same(&g_sites[at], tid, type, sclass, frames, depth)) return &g_sites[at];
    }
    if (g_n_sites >= ALLOC_MAX_SITES || g_n_pool + depth > 16u * ALLOC_MAX_SITES) return NULL;
    if (grow((void **)&g_sites, &g_cap_sites, g_n_sites, sizeof *g_sites) < 0) return NULL;
    while (g_n_pool + depth > g_cap_pool) {
        size_t cap = g_cap_pool ? g_cap_pool * 2 : 4096;
        uint32_t *p = realloc(g_pool, cap * sizeof *p);
        if (!p) return NULL;
        g_pool = p, g_cap_pool = cap;
    }
    uint64_t k = h;
    while (idmap_get(&g_site_map, (uintptr_t)k) != UINT32_MAX) k = (k + 2) | 1;
    if (idmap_put(&g_site_map, (uintptr_t)k, (uint32_t)g_n_sites) < 0) return NULL;
    site_t *s = &g_sites[g_n_sites++];
    memset(s, 0, sizeof *s);
    s->tid = tid, s->type = type, s->sclass = sclass, s->depth = depth, s->frames = (uint32_t)g_n_pool, s->hash = h;
    if (depth) /* an empty stack: the pool may still be NULL (memcpy's UB, UBSan says) */
        memcpy(g_pool + g_n_pool, frames, depth * sizeof *frames);
    g_n_pool += depth;
    return s;
}

HIDDEN site_t *alloc_site_at(uint32_t index) { return index < g_n_sites ? &g_sites[index] : NULL; }
HIDDEN uint32_t alloc_site_number(const site_t *s) { return (uint32_t)(s - g_sites); }

/* ---- threads --------------------------------------------------------------------------- */
static athread_t g_athreads[ALLOC_MAX_THREADS];
static uint32_t g_n_athreads;

HIDDEN athread_t *alloc_thread(uint32_t tid) {
    for (uint32_t i = 0; i < g_n_athreads; i++)
        if (g_athreads[i].tid == tid) return &g_athreads[i];
    if (g_n_athreads == ALLOC_MAX_THREADS) return NULL;
    athread_t *t = &g_athreads[g_n_athreads++];
    memset(t, 0, sizeof *t);
    t->tid = tid;
    return t;
}

/* A moment the live estimate is measured at (a GC's end, the end): each thread's own peak,
 * and, when the process's estimate is at its highest, every site's and thread's part of it. */
HIDDEN void alloc_snapshot_peak(void) {
    for (uint32_t i = 0; i < g_n_athreads; i++)
        if (g_athreads[i].live > g_athreads[i].peak) g_athreads[i].peak = g_athreads[i].live;
    if (g_live_bytes < g_peak_bytes) return;
    g_peak_bytes = g_live_bytes;
    for (size_t i = 0; i < g_n_sites; i++) g_sites[i].at_peak = g_sites[i].live;
    for (uint32_t i = 0; i < g_n_athreads; i++) g_athreads[i].at_peak = g_athreads[i].live;
}

/* Live bytes by site, for the GC's bookkeeping: a sample died. */
HIDDEN void alloc_site_died(uint32_t site, uint64_t weight) {
    if (site >= g_n_sites) return;
    site_t *s = &g_sites[site];
    s->live -= weight < s->live ? weight : s->live;
    athread_t *t = alloc_thread(s->tid);
    if (t) t->live -= weight < t->live ? weight : t->live;
}

HIDDEN uint32_t alloc_write_sites(FILE *f) {
    /* a thread may be naming a type of a new stratum; one that died in the lock (a crash)
     * must not keep the profile from being saved */
    int locked = 0;
    for (int i = 0; i < 100 && !(locked = pthread_mutex_trylock(&g_names_lock) == 0); i++) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    uint32_t n_types = g_types.n;
    for (uint32_t i = 0; i < n_types; i++) fprintf(f, "atype\t%u\t%s\n", i, g_types.names[i]);
    if (locked) pthread_mutex_unlock(&g_names_lock);
    for (uint32_t i = 0; i < g_frames.n; i++) fprintf(f, "aframe\t%u\t%s\n", i, g_frames.names[i]);
    for (size_t i = 0; i < g_n_sites; i++) {
        site_t *s = &g_sites[i];
        fprintf(f, "asite\t%zu\t%u\t%ld\t%u\t%llu\t%llu\t%llu\t%llu\t", i, s->tid,
                s->type == UINT32_MAX ? -1L : (long)s->type, s->sclass, (unsigned long long)s->samples,
                (unsigned long long)s->bytes, (unsigned long long)s->at_peak, (unsigned long long)s->live);
        for (uint32_t d = 0; d < s->depth; d++)
            fprintf(f, d ? ",%ld" : "%ld", g_pool[s->frames + d] == UINT32_MAX ? -1L : (long)g_pool[s->frames + d]);
        fputc('\n', f);
    }
    for (uint32_t i = 0; i < g_n_athreads; i++)
        fprintf(f, "athread\t%u\t%llu\t%llu\t%llu\t%llu\n", g_athreads[i].tid,
                (unsigned long long)g_athreads[i].allocated, (unsigned long long)g_athreads[i].peak,
                (unsigned long long)g_athreads[i].at_peak, (unsigned long long)g_athreads[i].live);
    return n_types;
}
