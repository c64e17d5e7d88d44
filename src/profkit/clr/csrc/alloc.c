/* libprofkit_clr: allocations: the ObjectAllocated callback, its sampling and the records.
 *
 * alloc.h says what is recorded and why. This unit owns the hot path (every object the
 * program allocates): its exact size is added to per-thread counters (no shared cache line
 * is written), and a thread-local byte countdown decides whether it is a sample; only a
 * sample takes a stack snapshot, names and a lock. Records (docs/clr.md):
 *   alloc <mean> <objects> <bytes> <samples> <exact> <untracked> <gcs> <peak> <stack failures>
 *         <moved> <died>   (followed samples a GC moved, found dead)
 * then alloc_sites.c's atype / aframe / asite / athread records.
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

/* A thread's exact counts: written only by the thread, read (racily, whole words) at the end. */
typedef struct counts {
    struct counts *next;
    uint64_t objects, bytes;
} counts_t;
static _Atomic(counts_t *) g_counts;
#define FAST_TLS __attribute__((tls_model("initial-exec"))) /* the hot path's: no __tls_get_addr */
static _Thread_local counts_t *t_counts FAST_TLS;
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
static void sample(ObjectID obj, ClassID cls, uint64_t weight) {
    snap_t snap = {.n = 0};
    HRESULT hr = ((fn_DoStackSnapshot)SLOT(g_info, PI_DoStackSnapshot))(g_info, 0, on_frame, 0, &snap, NULL, 0);
    if (hr < 0 && snap.n == 0) atomic_fetch_add_explicit(&g_stack_failures, 1, memory_order_relaxed);
    uint32_t frames[ALLOC_MAX_DEPTH];
    for (uint32_t i = 0; i < snap.n; i++) frames[snap.n - 1 - i] = alloc_frame_index(snap.fids[i]);
    uint32_t type = alloc_type_index(cls), tid = current_tid();
    pthread_mutex_lock(&g_alloc_lock);
    site_t *s = alloc_site(tid, type, frames, snap.n);
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
    if (!c) {
        if (!(c = calloc(1, sizeof *c))) return S_OK;
        c->next = atomic_load(&g_counts);
        while (!atomic_compare_exchange_weak(&g_counts, &c->next, c)) {}
        t_counts = c;
    }
    c->objects++;
    c->bytes += size;
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
    sample(obj, cls, (uint64_t)(weight + 0.5));
    return S_OK;
}

/* The allocation records, into the result file (output.c holds g_lock). */
HIDDEN void alloc_write(FILE *f) {
    if (!g_alloc_on) return;
    uint64_t objects = 0, bytes = 0;
    for (counts_t *c = atomic_load(&g_counts); c; c = c->next) objects += c->objects, bytes += c->bytes;
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
    alloc_write_sites(f);
    if (locked) pthread_mutex_unlock(&g_alloc_lock);
}
