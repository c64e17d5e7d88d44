/* libprofkit_clr: allocations: the ObjectAllocated callback, its strata, its sampling and the records.
 *
 * alloc.h says what is recorded and why. This unit owns the hot path (every object the
 * program allocates): its exact size is added to its stratum's counters, (type, power-of-two
 * size class) in a table of the allocating thread's own (no shared cache line is written,
 * no lock taken), and a thread-local byte countdown decides whether it is a sample; only a
 * sample takes a stack snapshot, names and a lock. Records (docs/clr.md):
 *   alloc <mean> <objects> <bytes> <samples> <exact> <untracked> <gcs> <peak> <stack failures>
 *         <moved> <died>   (followed samples a GC moved, found dead)
 * then alloc_sites.c's atype / aframe / asite / athread records, then
 *   astratum <tid> <type|-1> <size class> <objects> <bytes>   (exact; class 255: "other")
 * The alloc record's objects and bytes are the strata's sums, so the two always agree.
 */
#include "alloc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

HIDDEN int g_alloc_on;
HIDDEN uint64_t g_alloc_mean = 512 * 1024;
HIDDEN pthread_mutex_t g_alloc_lock = PTHREAD_MUTEX_INITIALIZER;

typedef HRESULT (*fn_GetObjectSize2)(void *, ObjectID, size_t *);
typedef HRESULT (*fn_GetObjectSize)(void *, ObjectID, ULONG *);
typedef HRESULT (*fn_StackCallback)(FunctionID, UINT_PTR, UINT_PTR, uint32_t, uint8_t *, void *);
typedef HRESULT (*fn_DoStackSnapshot)(void *, ThreadID, fn_StackCallback, uint32_t, void *, uint8_t *, uint32_t);

/* A stratum's exact counts; a slot is empty while objects is 0. */
typedef struct {
    ClassID cls;
    uint32_t type, sclass; /* alloc_type_index(cls), named on first sight; the size class */
    uint64_t objects, bytes;
} stratum_t;

/* A thread's strata, open addressing, at most half full. A bigger table replaces it (the
 * old one is left as it was, never freed: the writer may be reading it at the end). */
typedef struct {
    uint32_t cap, used;
    stratum_t slot[];
} strata_t;

/* A thread's exact counts: written only by the thread, read (racily, whole words) at the end. */
typedef struct counts {
    struct counts *next;
    uint32_t tid;
    _Atomic(strata_t *) strata;
    stratum_t other; /* the strata beyond ALLOC_MAX_STRATA, all types (size class 255) */
} counts_t;
static _Atomic(counts_t *) g_counts;
#define FAST_TLS __attribute__((tls_model("initial-exec"))) /* the hot path's: no __tls_get_addr */
static _Thread_local counts_t *t_counts FAST_TLS;
static _Thread_local strata_t *t_strata FAST_TLS; /* the thread's own table, as t_counts->strata */
static _Thread_local int64_t t_countdown FAST_TLS = -1;
static _Thread_local uint64_t t_rng;
static _Atomic uint64_t g_samples, g_exact, g_stack_failures;

/* Opens the allocation recording when PROFKIT_CLR_EVENTS has alloc: 0, or -1 (said why). */
HIDDEN int alloc_open(void) {
    if (!(S.events & EV_ALLOC)) return 0;
    const char *v = getenv("PROFKIT_CLR_ALLOC_SAMPLE");
    if (v && *v) {
        char *end;
        unsigned long long n = strtoull(v, &end, 10);
        if (*end || *v < '0' || *v > '9' || n < 1 || n > (1ull << 40)) {
            say("profkit: clr: PROFKIT_CLR_ALLOC_SAMPLE='%s': expected a number of bytes from 1 to "
                "1099511627776; the program runs unprofiled", v);
            return -1;
        }
        g_alloc_mean = n;
    }
    g_alloc_on = 1;
    return 0;
}

/* ---- strata ------------------------------------------------------------------------------ */
static uint32_t size_class(uint64_t size) { return size ? 63u - (uint32_t)__builtin_clzll(size) : 0u; }

/* The slot of (cls, sclass): a multiplicative hash's high bits, the size class mixed into
 * the low bits first (a product's low input bits reach all of its high ones: one type's size
 * classes must not share a chain, as they did with the class in the top bits). */
static size_t stratum_slot(const strata_t *t, ClassID cls, uint32_t sclass) {
    uint64_t h = ((uint64_t)(cls >> 3) ^ (uint64_t)sclass * 0x100000001B3ull) * 0x9E3779B97F4A7C15ull;
    size_t i = (size_t)(h >> 40) & (t->cap - 1);
    while (t->slot[i].objects && (t->slot[i].cls != cls || t->slot[i].sclass != sclass)) i = (i + 1) & (t->cap - 1);
    return i;
}

/* The thread's table, doubled (NULL: the cap is reached or no memory; the old one stays). */
static strata_t *strata_grow(counts_t *c, strata_t *old) {
    uint32_t cap = old ? old->cap * 2 : 256;
    if (cap > 2 * ALLOC_MAX_STRATA) return NULL;
    strata_t *t = calloc(1, sizeof *t + cap * sizeof t->slot[0]);
    if (!t) return NULL;
    t->cap = cap;
    for (uint32_t i = 0; old && i < old->cap; i++)
        if (old->slot[i].objects) t->slot[stratum_slot(t, old->slot[i].cls, old->slot[i].sclass)] = old->slot[i];
    t->used = old ? old->used : 0;
    atomic_store_explicit(&c->strata, t, memory_order_release);
    return t;
}

/* Counts one object in its stratum; the stratum's size class (ALLOC_OTHER_CLASS: beyond the
 * cap, where its samples go too). The thread's counts_t exists. */
static uint32_t stratum_count(counts_t *c, ClassID cls, uint64_t size) {
    uint32_t sclass = size_class(size);
    strata_t *t = t_strata;
    if (t) {
        stratum_t *s = &t->slot[stratum_slot(t, cls, sclass)];
        if (s->objects) {
            s->objects++, s->bytes += size;
            return sclass;
        }
    }
    /* a new stratum (rare: once per type and size class a thread allocates) */
    if (!t || (t->used + 1) * 2 > t->cap) {
        strata_t *bigger = strata_grow(c, t);
        if (!bigger) {
            c->other.objects++, c->other.bytes += size;
            return ALLOC_OTHER_CLASS;
        }
        t = t_strata = bigger;
    }
    stratum_t *s = &t->slot[stratum_slot(t, cls, sclass)];
    s->cls = cls, s->sclass = sclass, s->type = alloc_type_index(cls), s->bytes = size;
    t->used++;
    __atomic_store_n(&s->objects, 1, __ATOMIC_RELEASE); /* now the slot is whole (the writer's copy) */
    return sclass;
}

/* The thread's counts, made on its first object (NULL: no memory; the object is not counted). */
static counts_t *thread_counts(void) {
    counts_t *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->tid = current_tid();
    c->other.type = UINT32_MAX, c->other.sclass = ALLOC_OTHER_CLASS;
    c->next = atomic_load(&g_counts);
    while (!atomic_compare_exchange_weak(&g_counts, &c->next, c)) {}
    return t_counts = c;
}

static void write_stratum(FILE *f, uint32_t tid, const stratum_t *s, uint32_t n_types) {
    long type = s->type < n_types ? (long)s->type : -1L; /* -1: unnamed, or named after the atypes */
    fprintf(f, "astratum\t%u\t%ld\t%u\t%llu\t%llu\n", tid, type, s->sclass, (unsigned long long)s->objects,
            (unsigned long long)s->bytes);
}

/* A uniform number in (0, 1): xorshift64*, seeded per thread (as heap/csrc/hook.c). */
static double uniform01(void) {
    if (t_rng == 0) {
        t_rng = (uint64_t)(uintptr_t)&t_rng ^ ((uint64_t)current_tid() * 0x9E3779B97F4A7C15ull) ^ now_ns();
        if (t_rng == 0) t_rng = 0x2545F4914F6CDD1Dull;
    }
    t_rng ^= t_rng >> 12;
    t_rng ^= t_rng << 25;
    t_rng ^= t_rng >> 27;
    uint64_t r = t_rng * 0x2545F4914F6CDD1Dull;
    return ((double)(r >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

static int64_t draw_countdown(void) {
    double d = -log(uniform01()) * (double)g_alloc_mean;
    return d < 1.0 ? 1 : (d > 4e18 ? (int64_t)4e18 : (int64_t)d);
}

static uint64_t object_size(ObjectID obj) {
    if (g_info_version >= 4) {
        size_t size = 0;
        return ((fn_GetObjectSize2)SLOT(g_info, PI_GetObjectSize2))(g_info, obj, &size) >= 0 ? size : 0;
    }
    ULONG size = 0;
    return ((fn_GetObjectSize)SLOT(g_info, PI_GetObjectSize))(g_info, obj, &size) >= 0 ? size : 0;
}

typedef struct {
    FunctionID fids[ALLOC_MAX_DEPTH];
    uint32_t n;
} snap_t;

static HRESULT on_frame(FunctionID fid, UINT_PTR ip, UINT_PTR frame, uint32_t n, uint8_t *ctx, void *data) {
    (void)ip, (void)frame, (void)n, (void)ctx;
    snap_t *s = data;
    if (fid && s->n < ALLOC_MAX_DEPTH) s->fids[s->n++] = fid; /* 0: the runtime's own frames */
    return s->n < ALLOC_MAX_DEPTH ? S_OK : S_FALSE;            /* S_FALSE ends the walk */
}

/* One sample: the allocating thread's stack (a snapshot), its site, and following it. */
static void sample(ObjectID obj, ClassID cls, uint32_t sclass, uint64_t weight) {
    snap_t snap = {.n = 0};
    HRESULT hr = ((fn_DoStackSnapshot)SLOT(g_info, PI_DoStackSnapshot))(g_info, 0, on_frame, 0, &snap, NULL, 0);
    if (hr < 0 && snap.n == 0) atomic_fetch_add_explicit(&g_stack_failures, 1, memory_order_relaxed);
    uint32_t frames[ALLOC_MAX_DEPTH];
    for (uint32_t i = 0; i < snap.n; i++) frames[snap.n - 1 - i] = alloc_frame_index(snap.fids[i]);
    uint32_t type = alloc_type_index(cls), tid = current_tid();
    pthread_mutex_lock(&g_alloc_lock);
    site_t *s = alloc_site(tid, type, sclass, frames, snap.n);
    if (s) {
        s->samples++;
        s->bytes += weight;
        s->live += weight;
        athread_t *t = alloc_thread(tid);
        if (t) t->allocated += weight, t->live += weight;
        alloc_follow(obj, alloc_site_number(s), weight);
    }
    pthread_mutex_unlock(&g_alloc_lock);
}

HIDDEN HRESULT cb_ObjectAllocated(void *self, ObjectID obj, ClassID cls) {
    (void)self;
    uint64_t size = object_size(obj);
    counts_t *c = t_counts;
    if (!c && !(c = thread_counts())) return S_OK;
    uint32_t sclass = stratum_count(c, cls, size);
    double weight = (double)size;
    if (size >= g_alloc_mean) {
        atomic_fetch_add_explicit(&g_exact, 1, memory_order_relaxed);
    } else {
        if (t_countdown < 0) t_countdown = draw_countdown();
        t_countdown -= (int64_t)size;
        if (t_countdown > 0) return S_OK;
        t_countdown = draw_countdown();
        double p = -expm1(-(double)size / (double)g_alloc_mean);
        if (p > 0 && (double)size / p >= weight) weight = (double)size / p;
    }
    atomic_fetch_add_explicit(&g_samples, 1, memory_order_relaxed);
    sample(obj, cls, sclass, (uint64_t)(weight + 0.5));
    return S_OK;
}

/* The allocation records, into the result file (output.c holds g_lock). */
HIDDEN void alloc_write(FILE *f) {
    if (!g_alloc_on) return;
    /* each thread's table as it is now (a running thread may still add to it: the sums are
     * taken from this copy, so they agree with the astratum records) */
    typedef struct {
        counts_t *c;
        strata_t *copy;
        stratum_t other;
    } seen_t;
    size_t n_seen = 0, cap_seen = 0;
    seen_t *seen = NULL;
    uint64_t objects = 0, bytes = 0;
    for (counts_t *c = atomic_load(&g_counts); c; c = c->next) {
        if (grow((void **)&seen, &cap_seen, n_seen, sizeof *seen) < 0) break;
        seen_t *v = &seen[n_seen++];
        v->c = c, v->other = c->other, v->copy = NULL;
        strata_t *t = atomic_load_explicit(&c->strata, memory_order_acquire);
        if (t && (v->copy = malloc(sizeof *t + t->cap * sizeof t->slot[0])) != NULL)
            memcpy(v->copy, t, sizeof *t + t->cap * sizeof t->slot[0]);
        for (uint32_t i = 0; v->copy && i < v->copy->cap; i++) objects += v->copy->slot[i].objects, bytes += v->copy->slot[i].bytes;
        objects += v->other.objects, bytes += v->other.bytes;
    }
    /* a thread that died in the lock (a crash) must not keep the profile from being saved */
    int locked = 0;
    for (int i = 0; i < 200 && !(locked = pthread_mutex_trylock(&g_alloc_lock) == 0); i++) {
        struct timespec ts = {0, 5000000};
        nanosleep(&ts, NULL);
    }
    alloc_snapshot_peak();
    fprintf(f, "alloc\t%llu\t%llu\t%llu\t%llu\t%llu\t%llu\t%llu\t%llu\t%llu\t%llu\t%llu\n", (unsigned long long)g_alloc_mean,
            (unsigned long long)objects, (unsigned long long)bytes, (unsigned long long)atomic_load(&g_samples),
            (unsigned long long)atomic_load(&g_exact), (unsigned long long)g_untracked,
            (unsigned long long)g_gcs_seen, (unsigned long long)g_peak_bytes,
            (unsigned long long)atomic_load(&g_stack_failures), (unsigned long long)g_moved, (unsigned long long)g_died);
    uint32_t n_types = alloc_write_sites(f);
    if (locked) pthread_mutex_unlock(&g_alloc_lock);
    for (size_t k = 0; k < n_seen; k++) {
        for (uint32_t i = 0; seen[k].copy && i < seen[k].copy->cap; i++)
            if (seen[k].copy->slot[i].objects) write_stratum(f, seen[k].c->tid, &seen[k].copy->slot[i], n_types);
        if (seen[k].other.objects) write_stratum(f, seen[k].c->tid, &seen[k].other, n_types);
        free(seen[k].copy);
    }
    free(seen);
}
